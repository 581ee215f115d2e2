package apitest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/p2pkit/p2pkit"

// shippedImports maps every non-test Go file of the module outside
// internal/testtools (and testdata) to the import paths it names.
func shippedImports(t *testing.T) map[string][]string {
	t.Helper()
	root := "../../.."
	fset := token.NewFileSet()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/testtools" || d.Name() == "testdata" || rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[rel] = append(out[rel], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckImportsNoReader: the check engine judges facts and reads nothing, so
// none of its files imports a reader package (hostfs, sysfs, procfs, snapshot);
// the fact types it needs are the model's (node, pcie).
func TestCheckImportsNoReader(t *testing.T) {
	readers := []string{module + "/hostfs", module + "/sysfs", module + "/procfs", module + "/snapshot"}
	files := 0
	for file, imports := range shippedImports(t) {
		if !strings.HasPrefix(file, "check/") {
			continue
		}
		files++
		for _, p := range imports {
			for _, r := range readers {
				if p == r {
					t.Errorf("%s imports the reader %s: name the fact type in the model (node) instead", file, p)
				}
			}
		}
	}
	if files == 0 {
		t.Fatal("no files of check found")
	}
}

// TestNothingShippedImportsTestTools: internal/testtools is test tooling; no
// file that ships (any non-test file outside it) imports it.
func TestNothingShippedImportsTestTools(t *testing.T) {
	for file, imports := range shippedImports(t) {
		for _, p := range imports {
			if p == module+"/internal/testtools" || strings.HasPrefix(p, module+"/internal/testtools/") {
				t.Errorf("%s imports the test tooling %s", file, p)
			}
		}
	}
}
