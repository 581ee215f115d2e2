package main

// schemaVersion is the major version of gdrbench's JSON output
// (schema/gdrbench.v1.json). Changes within a version only add fields.
const schemaVersion = "1"
