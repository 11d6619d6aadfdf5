"""The BSO server's database: schema, async engines, migrations."""
