/**
 * The SQL that creates a new cluster's application user, its database and the replication user, as a
 * psql invocation over the local socket (peer authentication as the superuser). The passwords are the
 * SCRAM verifiers the operator computed (scram.ts), never the plain text, so that the credentials sidecar
 * finds them already applied. psql reads the values with backquoted `printf` (a shell builtin), so
 * nothing appears in a process's arguments, and quotes them with format(%I, %L). Idempotent: creates what is missing, then (re)sets the passwords and
 * ownership. The replication user may also read the files pg_rewind needs (and nothing else).
 * Env: APP_USER, APP_PASSWORD_SCRAM, APP_DATABASE, REPLICATION_USER, REPLICATION_PASSWORD_SCRAM; POSTGRES_USER;
 * PGHOST/PGPORT.
 */
export function initSql(): string {
  return `psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --username "\${POSTGRES_USER:-postgres}" --dbname postgres <<'EOSQL'
\\set app_user \`printf '%s' "$APP_USER"\`
\\set app_password \`printf '%s' "$APP_PASSWORD_SCRAM"\`
\\set app_database \`printf '%s' "$APP_DATABASE"\`
\\set replication_user \`printf '%s' "$REPLICATION_USER"\`
\\set replication_password \`printf '%s' "$REPLICATION_PASSWORD_SCRAM"\`
SELECT format('CREATE ROLE %I', :'app_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_user') \\gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOREPLICATION PASSWORD %L', :'app_user', :'app_password') \\gexec
SELECT format('CREATE ROLE %I', :'replication_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'replication_user') \\gexec
SELECT format('ALTER ROLE %I WITH LOGIN REPLICATION NOSUPERUSER PASSWORD %L', :'replication_user', :'replication_password') \\gexec
SELECT format('GRANT EXECUTE ON FUNCTION %s TO %I', f, :'replication_user')
  FROM unnest(ARRAY['pg_catalog.pg_ls_dir(text, boolean, boolean)', 'pg_catalog.pg_stat_file(text, boolean)',
    'pg_catalog.pg_read_binary_file(text)', 'pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)']) f \\gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'app_database', :'app_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'app_database') \\gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', :'app_database', :'app_user') \\gexec
\\connect :"app_database"
SELECT format('ALTER SCHEMA public OWNER TO %I', :'app_user') \\gexec
EOSQL`;
}
