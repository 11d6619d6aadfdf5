"""Alembic environment for the BSO tables; run through `basht bso migrate`, not the alembic CLI.

Online, `basht.bso.db.migrate` hands over an open connection (the async engine runs us inside
`run_sync`); offline (`--sql`) the URL comes from the config and SQL is printed instead.
"""

from __future__ import annotations

from alembic import context

from basht.bso.db.schema import Base

VERSION_TABLE = "bso_alembic_version"

config = context.config
connection = config.attributes.get("connection")

if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()
elif connection is None:
    raise RuntimeError("apply BSO migrations with `basht bso migrate --db URL`")
else:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
