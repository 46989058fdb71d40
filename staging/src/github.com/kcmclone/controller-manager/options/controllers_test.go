package options

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestIsControllerEnabled(t *testing.T) {
	off := sets.New("bootstrap-signer-controller")
	cases := []struct {
		name        string
		controller  string
		controllers []string
		want        bool
	}{
		{"star enables on-by-default", "deployment-controller", []string{"*"}, true},
		{"star skips off-by-default", "bootstrap-signer-controller", []string{"*"}, false},
		{"explicit enables off-by-default", "bootstrap-signer-controller", []string{"*", "bootstrap-signer-controller"}, true},
		{"explicit alone", "deployment-controller", []string{"deployment-controller"}, true},
		{"not listed without star", "deployment-controller", []string{"job-controller"}, false},
		{"disable wins over star", "deployment-controller", []string{"*", "-deployment-controller"}, false},
		{"first match wins: disable first", "deployment-controller", []string{"-deployment-controller", "deployment-controller"}, false},
		{"first match wins: enable first", "deployment-controller", []string{"deployment-controller", "-deployment-controller"}, true},
		{"star after disable", "deployment-controller", []string{"-deployment-controller", "*"}, false},
		{"empty list", "deployment-controller", nil, false},
		{"other disabled only", "deployment-controller", []string{"-job-controller"}, false},
		{"other disabled with star", "deployment-controller", []string{"-job-controller", "*"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsControllerEnabled(tc.controller, off, tc.controllers); got != tc.want {
				t.Errorf("IsControllerEnabled(%q, %v) = %v, want %v", tc.controller, tc.controllers, got, tc.want)
			}
		})
	}
}

var (
	testControllers = []string{"deployment-controller", "replicaset-controller", "bootstrap-signer-controller"}
	testAliases     = map[string]string{"deployment": "deployment-controller", "replicaset": "replicaset-controller", "bootstrapsigner": "bootstrap-signer-controller"}
)

func TestCanonicalControllers(t *testing.T) {
	got := CanonicalControllers([]string{"*", "deployment", "-replicaset", "bootstrap-signer-controller", "-deployment-controller"}, testAliases)
	want := []string{"*", "deployment-controller", "-replicaset-controller", "bootstrap-signer-controller", "-deployment-controller"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if CanonicalControllers(nil, testAliases) != nil {
		t.Errorf("nil in, want nil out")
	}
}

func TestValidateControllers(t *testing.T) {
	for _, ok := range [][]string{
		nil,
		{"*"},
		{"*", "-deployment", "bootstrapsigner"},
		{"deployment-controller", "-replicaset-controller"},
	} {
		if err := ValidateControllers(ok, testControllers, testAliases); err != nil {
			t.Errorf("%v: unexpected error %v", ok, err)
		}
	}
	err := ValidateControllers([]string{"*", "foo", "-bar", "-*"}, testControllers, testAliases)
	if err == nil {
		t.Fatal("want error")
	}
	msg := err.Error()
	for _, want := range []string{`"foo"`, `"bar"`, `"*"`, "bootstrap-signer-controller, deployment-controller, replicaset-controller"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %s", msg, want)
		}
	}
	if strings.Count(msg, "\n") != 0 {
		t.Errorf("error should be one line: %q", msg)
	}
}
