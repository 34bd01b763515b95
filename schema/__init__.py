"""memfleet's SQL schema, shipped in the wheel as the package ``memfleet_schema``.

Only SQL lives here; this file makes the folder a regular package, so
``importlib.resources.files("memfleet_schema")`` is a real directory in an
installed wheel and in an editable install alike (worker/store/migrate.py).
"""
