// Package schema holds the JSON Schemas (draft 2020-12) of nvcomm's files:
// fusion.schema.json (fusion files, formats 1 and 2), plan.schema.json
// (plans, as nvcomm lower writes them) and topology.schema.json (the cost
// model's topology files). Editors use them to check and complete the files
// as they are typed (docs/editors.md); the package's tests check every
// example, conformance fusion, golden plan and topology of the repository
// against them.
//
// A schema states a file's structure: its keys, the types and ranges of its
// values, which op takes which keys. What depends on several values at once
// (a split that must divide an extent, operands whose shapes must agree) is
// nvcomm's to check: nvcomm lower and nvcomm validate report it at its line
// and column.
package schema

import "embed"

// Files holds the schema files, by name: fusion.schema.json,
// plan.schema.json and topology.schema.json.
//
//go:embed *.schema.json
var Files embed.FS

// BaseURL is where the published schemas live; each schema's $id is
// BaseURL followed by its file name.
const BaseURL = "https://raw.githubusercontent.com/nvcomm/nvcomm/main/schema/"

// Names of the schema files.
const (
	Fusion   = "fusion.schema.json"
	Plan     = "plan.schema.json"
	Topology = "topology.schema.json"
)
