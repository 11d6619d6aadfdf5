"""The run store's Alembic migrations, shipped inside the package (no alembic.ini needed).

Only constants live here, so `Store` can tell a store that is up to date without importing
Alembic (trial worker processes and readers open stores often); `basht.store.migrate` applies
the revisions in `versions/`.
"""

#: The newest revision in `versions/`: a store whose version table holds it opens without Alembic.
#: A new revision moves this along with it (the store's tests fail until it does).
HEAD_REVISION = "0002"
#: The first revision: the schema as the releases without migrations left it.
BASELINE_REVISION = "0001"
#: The run store's own version table. `alembic_version` belongs to whoever takes the default:
#: Optuna's RDB storage does, and its study can share a database with the store.
VERSION_TABLE = "basht_alembic_version"
