package apitest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoInternalTypesExported: no exported function, method, type, field, variable
// or constant of a public package names a type from an internal package, which
// another module could not use.
func TestNoInternalTypesExported(t *testing.T) {
	root := "../../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (base == "internal" || base == "testdata" || base == "cmd" || base == "deploy" || strings.HasPrefix(base, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checkExportedDecls(t, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkExportedDecls reports every exported declaration of f that names a type
// from an internal package f imports.
func checkExportedDecls(t *testing.T, fset *token.FileSet, f *ast.File) {
	t.Helper()
	internal := internalImports(f)
	if len(internal) == 0 {
		return
	}
	check := func(what string, n ast.Node) {
		ast.Inspect(n, func(x ast.Node) bool {
			if sel, ok := x.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
					t.Errorf("%s: %s names %s.%s from %s", fset.Position(sel.Pos()), what, id.Name, sel.Sel.Name, internal[id.Name])
				}
			}
			return true
		})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				check("func "+d.Name.Name, d.Type)
			}
		case *ast.GenDecl:
			checkGenDecl(d, check)
		}
	}
}

// checkGenDecl calls check on the exported types and typed variables of d.
func checkGenDecl(d *ast.GenDecl, check func(string, ast.Node)) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				exportedParts(s.Type, func(n ast.Node) { check("type "+s.Name.Name, n) })
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() && s.Type != nil {
					check("var "+n.Name, s.Type)
				}
			}
		}
	}
}

// internalImports maps the local names of f's imports of internal packages to
// their paths.
func internalImports(f *ast.File) map[string]string {
	internal := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if !strings.Contains(p, "/internal/") && !strings.HasSuffix(p, "/internal") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = p
	}
	return internal
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	e := r.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if ix, ok := e.(*ast.IndexExpr); ok {
		e = ix.X
	}
	id, ok := e.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedParts calls visit on what another package sees of a type: the whole
// type, except the unexported fields of a struct and the unexported methods of an
// interface.
func exportedParts(typ ast.Expr, visit func(ast.Node)) {
	var fields *ast.FieldList
	switch t := typ.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		visit(typ)
		return
	}
	for _, f := range fields.List {
		exported := len(f.Names) == 0 // embedded
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			visit(f.Type)
		}
	}
}
