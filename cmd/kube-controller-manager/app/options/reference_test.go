package options

import (
	_ "embed"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// Copies of /work/shared/reference, so the test runs wherever the repo is.
var (
	//go:embed testdata/kcm-v1.37-flags.tsv
	flagsTSV string
	//go:embed testdata/kcm-v1.37-controllers.tsv
	controllersTSV string
)

type refFlag struct {
	section, name, typ, def, deprecated string
}

func readTSV(t *testing.T, data string) [][]string {
	t.Helper()
	var rows [][]string
	header := true
	for _, line := range strings.Split(data, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if header { // column names
			header = false
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	return rows
}

func referenceFlags(t *testing.T) []refFlag {
	t.Helper()
	var out []refFlag
	for _, r := range readTSV(t, flagsTSV) {
		if len(r) < 4 {
			t.Fatalf("bad flags row %q", r)
		}
		f := refFlag{section: r[0], name: r[1], typ: r[2], def: r[3]}
		if len(r) > 4 {
			f.deprecated = r[4]
		}
		out = append(out, f)
	}
	return out
}

// referenceControllers returns the controller lists the app will pass.
func referenceControllers(t *testing.T) (all, disabled []string, aliases map[string]string) {
	t.Helper()
	aliases = map[string]string{}
	for _, r := range readTSV(t, controllersTSV) {
		if len(r) < 3 {
			t.Fatalf("bad controllers row %q", r)
		}
		all = append(all, r[0])
		if r[1] != "" {
			aliases[r[1]] = r[0]
		}
		if r[2] == "off" {
			disabled = append(disabled, r[0])
		}
	}
	return all, disabled, aliases
}

// title is how cliflag.PrintSections names a section.
func title(section string) string {
	return strings.ToUpper(section[:1]) + section[1:]
}

// zeroDefaults is what pflag reports as DefValue for a type's zero value,
// which the TSV leaves empty.
var zeroDefaults = map[string]string{
	"bool":       "false",
	"int":        "0",
	"int32":      "0",
	"float32":    "0",
	"float":      "0",
	"duration":   "0s",
	"strings":    "[]",
	"string":     "",
	"quantity":   "0",
	"Level":      "0",
	"int32Slice": "[]",
}

func normalizeDefault(typ, def string) string {
	if def == "" {
		return zeroDefaults[typ]
	}
	// pflag's help quotes string defaults; DefValue does not.
	if typ == "string" && len(def) >= 2 && def[0] == '"' && def[len(def)-1] == '"' {
		return def[1 : len(def)-1]
	}
	return def
}

// Flags upstream still registers but hides as deprecated; the reference
// lists only visible flags.
var deprecatedHidden = map[string]string{
	"allow-untagged-cloud": "generic",
	"node-sync-period":     "generic",
}

// The app adds these itself (cobra help, verflag).
var appFlags = map[string]bool{"help": true, "version": true}

// ownFlags are this project's opt-in flags (README, "Differences from
// upstream"), with their section.
var ownFlags = map[string]string{
	"leader-elect-sharded":              "generic",
	"leader-elect-sharded-warm-standby": "generic",
}

func newFlags(t *testing.T) (*KubeControllerManagerOptions, cliflag.NamedFlagSets) {
	t.Helper()
	s, err := NewKubeControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	all, disabled, aliases := referenceControllers(t)
	return s, s.Flags(all, disabled, aliases)
}

func TestFlagsMatchReference(t *testing.T) {
	_, fss := newFlags(t)

	type located struct {
		section string
		flag    *pflag.Flag
	}
	got := map[string]located{}
	for _, section := range fss.Order {
		fss.FlagSets[section].VisitAll(func(f *pflag.Flag) {
			if prev, dup := got[f.Name]; dup {
				t.Errorf("--%s in both %q and %q", f.Name, prev.section, section)
			}
			got[f.Name] = located{section, f}
		})
	}

	want := map[string]bool{}
	var refSectionOrder []string
	for _, ref := range referenceFlags(t) {
		if appFlags[ref.name] {
			continue
		}
		want[ref.name] = true
		if n := len(refSectionOrder); n == 0 || refSectionOrder[n-1] != ref.section {
			refSectionOrder = append(refSectionOrder, ref.section)
		}
		g, ok := got[ref.name]
		if !ok {
			t.Errorf("--%s (%s) missing", ref.name, ref.section)
			continue
		}
		if title(g.section) != ref.section {
			t.Errorf("--%s in section %q, want %q", ref.name, title(g.section), ref.section)
		}
		if typ := helpType(g.flag); typ != ref.typ {
			t.Errorf("--%s type %q, want %q", ref.name, typ, ref.typ)
		}
		if def, wantDef := g.flag.DefValue, normalizeDefault(ref.typ, ref.def); def != wantDef {
			t.Errorf("--%s default %q, want %q", ref.name, def, wantDef)
		}
		if (ref.deprecated != "") != (g.flag.Deprecated != "") {
			t.Errorf("--%s deprecated %q, want %q", ref.name, g.flag.Deprecated, ref.deprecated)
		}
	}

	var extra []string
	for name, g := range got {
		if want[name] {
			continue
		}
		if section, ok := ownFlags[name]; ok {
			if g.section != section {
				t.Errorf("--%s in %q, want %q", name, g.section, section)
			}
			continue
		}
		if section, ok := deprecatedHidden[name]; ok {
			if g.section != section || g.flag.Deprecated == "" {
				t.Errorf("--%s should be deprecated in %q, is in %q deprecated=%q", name, section, g.section, g.flag.Deprecated)
			}
			continue
		}
		extra = append(extra, name)
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("flags not in the reference: %v", extra)
	}

	// Help prints sections in fss.Order; skip empty ones as PrintSections does.
	var order []string
	for _, section := range fss.Order {
		if fss.FlagSets[section].HasFlags() {
			order = append(order, title(section))
		}
	}
	refSectionOrder = removeGlobal(refSectionOrder)
	if strings.Join(order, ",") != strings.Join(refSectionOrder, ",") {
		t.Errorf("section order\n got %v\nwant %v", order, refSectionOrder)
	}
}

// helpType is the type name help prints, which the reference records; it
// differs from Value.Type() for slices and float64, and bools are listed.
func helpType(f *pflag.Flag) string {
	if f.Value.Type() == "bool" {
		return "bool"
	}
	name, _ := pflag.UnquoteUsage(f)
	return name
}

func removeGlobal(sections []string) []string {
	var out []string
	for _, s := range sections {
		if s != "Global" {
			out = append(out, s)
		}
	}
	return out
}

func TestNotYetUsedMarks(t *testing.T) {
	_, fss := newFlags(t)
	lookup := func(name string) *pflag.Flag {
		for _, fs := range fss.FlagSets {
			if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		t.Fatalf("--%s missing", name)
		return nil
	}
	for _, name := range []string{
		"concurrent-deployment-syncs", "concurrent-replicaset-syncs", "concurrent-rc-syncs",
		"controllers", "kube-api-qps", "leader-elect", "secure-port", "profiling", "kubeconfig",
		"use-service-account-credentials", "feature-gates",
		"node-monitor-period", "node-eviction-rate", "concurrent-namespace-syncs", "root-ca-file",
		"concurrent-gc-syncs", "enable-garbage-collector", "concurrent-job-syncs", "terminated-pod-gc-threshold",
		"cluster-signing-cert-file", "cluster-signing-duration", "legacy-service-account-token-clean-up-period",
		"concurrent-statefulset-syncs", "concurrent-disruption-syncs",
		"resource-quota-sync-period", "concurrent-resource-quota-syncs",
		"concurrent-daemonset-syncs", "mirroring-max-endpoints-per-subset",
		"concurrent-ephemeralvolume-syncs", "allocate-node-cidrs", "cluster-cidr", "node-cidr-mask-size",
		"horizontal-pod-autoscaler-sync-period", "concurrent-horizontal-pod-autoscaler-syncs",
		"attach-detach-reconcile-sync-period", "disable-force-detach-on-timeout",
		"concurrent-resourceclaim-syncs", "concurrent-device-taint-eviction-syncs",
		"pvclaimbinder-sync-period", "enable-hostpath-provisioner", "pv-recycler-pod-template-filepath-nfs",
		"cloud-config", "cluster-name", "concurrent-validating-admission-policy-status-syncs",
	} {
		if strings.HasSuffix(lookup(name).Usage, NotYetUsedSuffix) {
			t.Errorf("--%s is used but marked", name)
		}
	}
	// Every controller with flags exists now, so no flag is marked.
	for _, fs := range fss.FlagSets {
		fs.VisitAll(func(f *pflag.Flag) {
			if strings.HasSuffix(f.Usage, NotYetUsedSuffix) {
				t.Errorf("--%s is marked unused", f.Name)
			}
		})
	}
	// A section whose controller is missing still gets marked.
	controllersReadingFlags.Delete(sectionPVBinder)
	defer controllersReadingFlags.Insert(sectionPVBinder)
	_, fss = newFlags(t)
	for _, name := range []string{"pvclaimbinder-sync-period", "enable-hostpath-provisioner"} {
		if !strings.HasSuffix(lookup(name).Usage, NotYetUsedSuffix) { // lookup reads the new fss
			t.Errorf("--%s not marked while its controller is missing", name)
		}
	}
}
