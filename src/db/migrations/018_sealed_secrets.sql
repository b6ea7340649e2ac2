-- Webhook and approval signing secrets are stored sealed from now on (issue 20): AES-256-GCM
-- under SECRETS_ENCRYPTION_KEY, as `v1:<keyId>:<iv>:<ciphertext and tag>`, each bound to its row
-- (src/secrets/envelope.ts). A copy of the database then reveals none of them.
--
-- SQL has no key, so this migration cannot seal the rows already there: the service does, at
-- start-up, before it serves (src/secrets/reseal.ts). The new constraints are NOT VALID so that
-- they accept those rows until then, yet refuse every plain-text value written from now on.
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_secret_check;
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_previous_secret_check;
ALTER TABLE project_webhook_settings DROP CONSTRAINT project_webhook_settings_approval_secret_check;

ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_sealed
  CHECK (secret ~ '^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$') NOT VALID;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_previous_secret_sealed
  CHECK (previous_secret ~ '^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$') NOT VALID;
ALTER TABLE project_webhook_settings ADD CONSTRAINT project_webhook_settings_approval_secret_sealed
  CHECK (approval_secret ~ '^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$') NOT VALID;
