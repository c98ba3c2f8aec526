package pgstore

// Migrations are the schema's migrations, for tests that make a database
// of an earlier schema.
var Migrations = migrations
