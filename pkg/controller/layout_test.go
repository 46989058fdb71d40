package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// notControllers lists the packages under pkg/controller that hold shared
// code rather than a controller, relative to pkg/controller. They are exempt
// from the main-file rule.
var notControllers = map[string]string{
	"apis/config":             "component configuration types",
	"daemon/util":             "daemonset helpers",
	"deployment/util":         "deployment helpers",
	"history":                 "controller revision helpers",
	"namespace/deletion":      "namespace content deleter",
	"nodeipam/ipam/cidrset":   "CIDR allocator",
	"podautoscaler/metrics":   "metrics clients",
	"resourceclaim/podclaims": "pod claim name helpers",
	"resourcequota/evaluator": "quota evaluators",
	"testutil":                "test helpers",
	"util/endpointslice":      "endpointslice helpers",
	"validatingadmissionpolicystatus/typecheck": "CEL type checker",
	"volume/attachdetach/cache":                 "attach/detach state",
	"volume/attachdetach/operations":            "attach/detach operations",
	"volume/attachdetach/plugins":               "volume plugins",
	"volume/operationmetrics":                   "volume operation metrics",
	"volume/persistentvolume/metrics":           "persistent volume metrics",
	"volume/protectionutil":                     "finalizer helpers",
}

// severalControllers lists packages that hold more than one controller; each
// controller has its own <name>_controller.go file instead of one named after
// the package.
var severalControllers = map[string][]string{
	"bootstrap": {"bootstrapsigner_controller.go", "tokencleaner_controller.go"},
}

// descriptiveNames lists controller packages whose main type keeps a
// descriptive name instead of Controller/NewController.
var descriptiveNames = map[string]string{
	// Two controllers: ServiceAccountsController and TokensController.
	"serviceaccount": "two controllers",
	// One constructor per served ClusterTrustBundle version behind an interface.
	"certificates/clustertrustbundlepublisher": "GA/Beta/Alpha publishers",
	// GarbageCollector is driven together with its GraphBuilder.
	"garbagecollector": "GarbageCollector and GraphBuilder",
}

// TestControllerPackagesHaveMainFile keeps the naming pattern: every
// controller package under pkg/controller has its main file named
// <package>_controller.go (e.g. daemon/daemon_controller.go), declaring the
// package's main type Controller and its constructor NewController.
func TestControllerPackagesHaveMainFile(t *testing.T) {
	var checked, named []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(path)
		if !hasNonTestGoFile(t, path) {
			return nil
		}
		if _, ok := notControllers[rel]; ok {
			return nil
		}
		checked = append(checked, rel)
		want := []string{filepath.Base(path) + "_controller.go"}
		if files, ok := severalControllers[rel]; ok {
			want = files
		}
		for _, f := range want {
			if _, err := os.Stat(filepath.Join(path, f)); err != nil {
				t.Errorf("controller package pkg/controller/%s has no main file %s; name its main file after the package, or list it in notControllers if it is not a controller", rel, f)
			}
		}
		_, several := severalControllers[rel]
		if _, ok := descriptiveNames[rel]; ok || several {
			return nil
		}
		main := filepath.Join(path, want[0])
		hasType, hasNew := declaresControllerAndNew(t, main)
		if !hasType {
			t.Errorf("%s does not declare type Controller struct; name the package's main type Controller, or list the package in descriptiveNames", filepath.ToSlash(main))
		}
		if !hasNew {
			t.Errorf("%s does not declare func NewController; name the package's constructor NewController, or list the package in descriptiveNames", filepath.ToSlash(main))
		}
		named = append(named, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the walk must have seen the controllers.
	sort.Strings(checked)
	for _, must := range []string{"daemon", "replicaset", "volume/persistentvolume", "certificates/approver", "bootstrap"} {
		if i := sort.SearchStrings(checked, must); i >= len(checked) || checked[i] != must {
			t.Errorf("package %s was not checked; checked: %v", must, checked)
		}
	}
	// Positive control: the type and constructor were checked in these.
	sort.Strings(named)
	for _, must := range []string{"daemon", "replicaset", "replication", "volume/ephemeral", "certificates/approver"} {
		if i := sort.SearchStrings(named, must); i >= len(named) || named[i] != must {
			t.Errorf("package %s had its main type not checked; checked: %v", must, named)
		}
	}
	for rel := range notControllers {
		if _, err := os.Stat(rel); err != nil {
			t.Errorf("notControllers lists %s, which does not exist", rel)
		}
	}
	for rel := range descriptiveNames {
		if i := sort.SearchStrings(checked, rel); i >= len(checked) || checked[i] != rel {
			t.Errorf("descriptiveNames lists %s, which is not a controller package", rel)
		}
	}
}

// declaresControllerAndNew reports whether file declares, at top level, a
// struct type named Controller and a function (not a method) NewController.
func declaresControllerAndNew(t *testing.T, file string) (hasType, hasNew bool) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Controller" {
					if _, ok := ts.Type.(*ast.StructType); ok {
						hasType = true
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "NewController" {
				hasNew = true
			}
		}
	}
	return hasType, hasNew
}

func hasNonTestGoFile(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}
