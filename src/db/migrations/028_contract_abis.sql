-- Contract names and function names from an ABI the studio uploads (issue 24): the allowlist
-- picker and every table that shows a selector show `mint(uint256)` on "Game items" instead of
-- 0xa0712d68 on 0x5fbd…. Only what naming needs is kept: each function's selector and
-- signature, computed from the ABI when it is uploaded; the ABI itself is not stored.
CREATE TABLE contract_abis (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  name text CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[[:cntrl:]]'),
  -- [{"selector": "0xa0712d68", "signature": "mint(uint256)"}, …], in the ABI's order.
  functions jsonb NOT NULL CHECK (jsonb_typeof(functions) = 'array'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, address)
);
