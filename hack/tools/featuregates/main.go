// Command featuregates prints the feature gates declared in upstream's Go
// sources with their default and lock at a Kubernetes minor version: for
// each gate, the last versioned spec at or before that version. One line
// per gate: NAME DEFAULT LOCKED PRERELEASE. internal/config/featuregates.go
// (upstreamGates) was written from its output for v1.37.2:
//
//	M=$(go env GOMODCACHE); k=$M/k8s.io/kubernetes@v1.37.2; cb=$M/k8s.io/component-base@v0.37.2
//	go run ./hack/tools/featuregates 1.37 $k/pkg/features/kube_features.go \
//	    $M/k8s.io/apiserver@v0.37.2/pkg/features/kube_features.go \
//	    $M/k8s.io/apiextensions-apiserver@v0.37.2/pkg/features/kube_features.go \
//	    $M/k8s.io/client-go@v0.37.2/features/known_features.go \
//	    $cb/logs/api/v1/kube_features.go $cb/metrics/features/kube_features.go \
//	    $cb/zpages/features/kube_features.go
//
// plus featuregate's AllAlpha and AllBeta (off).
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
	"strings"
)

type spec struct {
	def, locked bool
	pre         string
	ver         string
}

func verLE(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 2; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return true
}

func main() {
	at := os.Args[1]
	files := os.Args[2:]
	consts := map[string]string{}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			panic(err)
		}
		parsed = append(parsed, af)
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						s, _ := strconv.Unquote(bl.Value)
						consts[name.Name] = s
					}
				}
			}
			return true
		})
	}
	out := map[string]spec{}
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if _, ok := cl.Type.(*ast.MapType); !ok {
				return true
			}
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				var id string
				switch k := kv.Key.(type) {
				case *ast.Ident:
					id = k.Name
				case *ast.SelectorExpr:
					id = k.Sel.Name
				default:
					continue
				}
				vals, ok := kv.Value.(*ast.CompositeLit)
				if !ok || len(vals.Elts) == 0 {
					continue
				}
				var best *spec
				for _, se := range vals.Elts {
					sl, ok := se.(*ast.CompositeLit)
					if !ok {
						continue
					}
					var s spec
					for _, f := range sl.Elts {
						fkv, ok := f.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						key := fkv.Key.(*ast.Ident).Name
						switch key {
						case "Version":
							call := fkv.Value.(*ast.CallExpr)
							s.ver, _ = strconv.Unquote(call.Args[0].(*ast.BasicLit).Value)
						case "Default":
							s.def = fkv.Value.(*ast.Ident).Name == "true"
						case "LockToDefault":
							s.locked = fkv.Value.(*ast.Ident).Name == "true"
						case "PreRelease":
							switch v := fkv.Value.(type) {
							case *ast.SelectorExpr:
								s.pre = v.Sel.Name
							case *ast.Ident:
								s.pre = v.Name
							}
						}
					}
					if s.ver == "" {
						continue
					}
					if verLE(s.ver, at) {
						c := s
						best = &c
					}
				}
				if best == nil {
					continue
				}
				name, ok := consts[id]
				if !ok {
					fmt.Fprintln(os.Stderr, "unresolved", id)
					name = id
				}
				if prev, dup := out[name]; dup && (prev.def != best.def || prev.locked != best.locked) {
					fmt.Fprintln(os.Stderr, "conflict", name, prev, *best)
				}
				out[name] = *best
			}
			return true
		})
	}
	var names []string
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := out[n]
		fmt.Printf("%s %v %v %s\n", n, s.def, s.locked, s.pre)
	}
}
