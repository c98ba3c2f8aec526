package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers is the import order of the Architecture section of CONTRIBUTING.md, bottom up: a
// package may import only packages before it. A new package needs a place
// here (and a line in CONTRIBUTING.md).
var layers = []string{
	"internal/canonjson",
	"internal/template",
	"internal/textfmt",
	"internal/child",
	"internal/testbin",
	"internal/pgtest",
	"internal/agenttest",
	"internal/mcpwire",
	"statemachine",
	"model",
	"filesnap",
	"mcpclient",
	"storage",
	"storage/internal/record",
	"storage/boltfile",
	"storage/pgstore",
	"effectlog",
	"logaddr",
	"conformance",
	"lifecycle",
	"shellstep",
	"policy",
	"agenthook",
	"saga",
	"proxy",
	"demo",
	"tui",
	"cmd",
	"tools/gendocs",
	"tools/shotcolors",
	".", // main.go
}

const module = "github.com/undolog/undolog"

// knowsNoEngine are the packages above the engines that reach them only
// through package storage: the rules, and the call flow with the front
// doors' own machinery.
var knowsNoEngine = map[string]bool{"effectlog": true, "lifecycle": true, "shellstep": true}

// sdk is the MCP Go SDK, which no package of the binary links: its init
// alone would take much of the start-up budget (go run -C bench . -only
// startup); tests use it as the reference client and server.
const sdk = "github.com/modelcontextprotocol/go-sdk"

// TestImportsRunOneWay keeps the layers of the Architecture section of CONTRIBUTING.md
// true: imports run down the layers only, and internal/ holds leaf libraries
// (no main packages, no imports of the rest of undolog), the rules
// (effectlog) and the call flow (lifecycle) know no engine, only the bbolt
// engine imports bbolt and no package imports the MCP Go SDK. Test files may import anything.
func TestImportsRunOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, name := rel(fields[0]), fields[1]
		at := slices.Index(layers, pkg)
		if at < 0 {
			t.Errorf("%s has no place in the layers: add it to layers in layers_test.go and to the Architecture section of CONTRIBUTING.md", pkg)
			continue
		}
		internal := strings.HasPrefix(pkg, "internal/")
		engine := strings.HasPrefix(pkg, "storage/") && !strings.HasPrefix(pkg, "storage/internal/")
		if internal && name == "main" {
			t.Errorf("%s is a main package: internal/ holds leaf libraries only", pkg)
		}
		for _, imp := range fields[2:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := rel(imp)
			switch i := slices.Index(layers, dep); {
			case internal:
				t.Errorf("%s imports %s: internal/ holds leaf libraries, which import nothing of undolog", pkg, dep)
			case i < 0 || i >= at:
				t.Errorf("%s imports %s, which is not below it in the layers", pkg, dep)
			case (engine || knowsNoEngine[pkg]) && strings.HasPrefix(dep, "storage/") && !strings.HasPrefix(dep, "storage/internal/"):
				t.Errorf("%s imports %s: engines stand alone, and the rules and the call flow know none of them (an engine's extra abilities are interfaces of package storage)", pkg, dep)
			}
		}
		for _, imp := range fields[2:] {
			if strings.HasPrefix(imp, sdk) {
				t.Errorf("%s imports %s: undolog speaks MCP itself (internal/mcpwire, mcpclient); only tests use the SDK, as a client driving the proxy", pkg, imp)
			}
			if strings.HasPrefix(imp, "go.etcd.io/bbolt") && pkg != "storage/boltfile" {
				t.Errorf("%s imports %s: only the bbolt engine (storage/boltfile) does", pkg, imp)
			}
		}
	}
}

func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// TestBinaryLinksNoMCPSDK: nor does anything the binary links pull the SDK
// in through a dependency.
func TestBinaryLinksNoMCPSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, sdk) {
			t.Errorf("the binary links %s", dep)
		}
	}
}
