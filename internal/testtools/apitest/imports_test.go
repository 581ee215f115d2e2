package apitest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
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

// TestContributingPackageOrder: docs/contributing.md lists every package of the
// module (internal/testtools aside) once, in dependency order: each package's
// imports from the module, as go list reports them, are listed above it.
func TestContributingPackageOrder(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/contributing.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := contributingPackages(t, string(doc))
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pos := map[string]int{}
	for i, p := range listed {
		if _, dup := pos[p]; dup {
			t.Errorf("docs/contributing.md lists %s twice", p)
		}
		pos[p] = i
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		if strings.HasPrefix(pkg, "internal/testtools") {
			continue
		}
		seen[pkg] = true
		at, ok := pos[pkg]
		if !ok {
			t.Errorf("docs/contributing.md does not list %s", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if d, ok := pos[dep]; ok && d > at {
				t.Errorf("docs/contributing.md lists %s above %s, which it imports", pkg, dep)
			}
		}
	}
	for _, p := range listed {
		if !seen[p] {
			t.Errorf("docs/contributing.md lists %s, which is no package of the module", p)
		}
	}
}

// contributingPackages returns the first word of each line of the fenced block
// after the packages marker of the guide.
func contributingPackages(t *testing.T, doc string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- packages:")
	if !ok {
		t.Fatal("docs/contributing.md has no <!-- packages: --> marker")
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/contributing.md: the packages block is not closed")
	}
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}
