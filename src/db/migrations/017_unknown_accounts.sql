-- A project's choice for senders whose code the service does not know (sponsor/sender-code.ts):
-- 'refuse' (the default, and what every existing project gets) answers account_not_supported;
-- 'caps_only' sponsors them with no code bound, so only the authorization's cost ceilings bound
-- what such an account does with the sponsor's gas.
ALTER TABLE projects
  ADD COLUMN unknown_accounts text NOT NULL DEFAULT 'refuse'
  CONSTRAINT projects_unknown_accounts CHECK (unknown_accounts IN ('refuse', 'caps_only'));
