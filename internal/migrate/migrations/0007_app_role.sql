-- 0007: the application role, crawlq_app: what the Lambda functions and ECS runners connect
-- as on AWS (through RDS Proxy, terraform/main.tf local.app_username). It reads and writes
-- rows and nothing else: no DDL, no role or database rights, so third-party command spiders
-- and a compromised function cannot change the schema or read other databases.
--
-- The role is created NOLOGIN here (migrations hold no secrets); the deploy's migrate step
-- (internal/dbsetup) gives it LOGIN and the password from its Secrets Manager secret.
-- Roles are cluster-wide while the grants are per schema (current_schema(), so the tests'
-- per-schema databases get them too); several schemas migrating at once may race on
-- CREATE ROLE, which is why both "already exists" errors are ignored.
DO $$
BEGIN
  CREATE ROLE crawlq_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;

DO $$
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO crawlq_app', current_schema());
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO crawlq_app', current_schema());
  EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO crawlq_app', current_schema());
  EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO crawlq_app', current_schema());
  -- Tables later migrations create (as the same migrating user) get the same rights.
  EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO crawlq_app', current_schema());
  EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO crawlq_app', current_schema());
  EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT EXECUTE ON FUNCTIONS TO crawlq_app', current_schema());
END
$$;
