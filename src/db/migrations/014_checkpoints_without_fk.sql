-- A checkpoint is written under a SHARE lock on ledger_entries (ledger/checkpoints.ts). Its
-- foreign key to projects made that insert take a KEY SHARE lock on the project's row, which a
-- reservation holds FOR UPDATE while it waits to insert its own ledger entries behind the SHARE
-- lock: a deadlock (seen under load: a batch of 85 authorizations answered 503). Projects are
-- never deleted, and a checkpoint is only written for a project read in the same statement, so
-- the key adds nothing; without it the checkpoint waits on no row lock.
ALTER TABLE ledger_checkpoints DROP CONSTRAINT ledger_checkpoints_project_id_fkey;
