package plugins

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// flexDriver is a FlexVolume driver script under test: each command
// answers with the given JSON (commands not listed answer "Not supported")
// and every call is logged, one line per call, to a file outside the
// driver directory.
type testFlexDriver struct {
	t       *testing.T
	pluginD string
	dirName string
	log     string
}

func installFlexDriver(t *testing.T, pluginDir, dirName string, replies map[string]string) *testFlexDriver {
	t.Helper()
	d := &testFlexDriver{t: t, pluginD: pluginDir, dirName: dirName, log: filepath.Join(t.TempDir(), "calls")}
	d.write(replies)
	return d
}

func (d *testFlexDriver) write(replies map[string]string) {
	d.t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\nFLEXCMD=\"$1\"\n")
	fmt.Fprintf(&b, "{ printf '%%s' \"$1\"; shift; for a in \"$@\"; do printf '\\t%%s' \"$a\"; done; echo; } >> %q\n", d.log)
	b.WriteString("case \"$FLEXCMD\" in\n")
	for _, cmd := range slices.Sorted(maps.Keys(replies)) {
		fmt.Fprintf(&b, "%s) echo '%s'; exit %d;;\n", cmd, replies[cmd], exitCode(replies[cmd]))
	}
	b.WriteString("esac\necho '{\"status\":\"Not supported\"}'\nexit 1\n")
	dir := filepath.Join(d.pluginD, d.dirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.t.Fatal(err)
	}
	parts := strings.Split(d.dirName, "~")
	exe := filepath.Join(dir, parts[len(parts)-1])
	// Write to a temporary name and rename, so that the executable is
	// never seen half written (nor busy, ETXTBSY).
	tmp := filepath.Join(d.t.TempDir(), "driver")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, exe); err != nil {
		d.t.Fatal(err)
	}
}

func exitCode(reply string) int {
	if strings.Contains(reply, `"Success"`) {
		return 0
	}
	return 1
}

// calls returns the logged calls, arguments tab-separated.
func (d *testFlexDriver) calls() []string {
	d.t.Helper()
	b, err := os.ReadFile(d.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func flexVolume(name, driver string) *Spec {
	return SpecFromVolume(&v1.Volume{Name: name, VolumeSource: v1.VolumeSource{FlexVolume: &v1.FlexVolumeSource{
		Driver: driver, FSType: "ext4", Options: map[string]string{"volumeID": "vol-" + name},
	}}})
}

const success = `{"status":"Success"}`

func TestFlexAttachDetach(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	drv := installFlexDriver(t, dir, "example.com~lvm", map[string]string{
		"init":       success,
		"attach":     `{"status":"Success","device":"/dev/flex0"}`,
		"detach":     success,
		"isattached": `{"status":"Success","attached":false}`,
	})
	p, err := NewFlex(logger, dir, "example.com~lvm")
	if err != nil {
		t.Fatal(err)
	}
	spec := flexVolume("data", "example.com/lvm")
	if p.Name() != "example.com/lvm" || !p.CanSupport(spec) || p.CanSupport(flexVolume("x", "example.com/other")) {
		t.Fatalf("plugin %q supports the wrong volumes", p.Name())
	}
	if ok, _ := p.CanAttach(spec); !ok {
		t.Fatal("attach is on unless init says otherwise")
	}
	name, err := UniqueVolumeName(p, spec)
	if err != nil || name != "example.com/lvm/data" {
		t.Errorf("unique name = %q, %v", name, err)
	}
	dev, err := p.Attach(ctx, spec, "node-1")
	if err != nil || dev != "/dev/flex0" {
		t.Fatalf("Attach = %q, %v", dev, err)
	}
	if err := p.Detach(ctx, "data", "node-1"); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	attached, err := p.VolumesAreAttached(ctx, []*Spec{spec}, "node-1")
	if err != nil || attached[spec] {
		t.Errorf("VolumesAreAttached = %v, %v", attached, err)
	}

	calls := drv.calls()
	wantCmds := []string{"init", "getvolumename", "attach", "detach", "isattached"}
	if len(calls) != len(wantCmds) {
		t.Fatalf("calls = %q", calls)
	}
	opts := map[string]string{}
	for i, c := range calls {
		args := strings.Split(c, "\t")
		if args[0] != wantCmds[i] {
			t.Errorf("call %d = %q, want %s", i, c, wantCmds[i])
		}
		switch args[0] {
		case "init":
			if len(args) != 1 {
				t.Errorf("init args %q", args)
			}
		case "attach", "isattached":
			if len(args) != 3 || args[2] != "node-1" {
				t.Errorf("%s args %q", args[0], args)
			}
			if err := json.Unmarshal([]byte(args[1]), &opts); err != nil {
				t.Fatal(err)
			}
		case "detach":
			if len(args) != 3 || args[1] != "data" || args[2] != "node-1" {
				t.Errorf("detach args %q", args)
			}
		}
	}
	want := map[string]string{"kubernetes.io/fsType": "ext4", "kubernetes.io/readwrite": "rw", "kubernetes.io/pvOrVolumeName": "data", "volumeID": "vol-data"}
	if fmt.Sprint(opts) != fmt.Sprint(want) {
		t.Errorf("options = %v, want %v", opts, want)
	}
}

func TestFlexReadOnlyPVOptions(t *testing.T) {
	pv := SpecFromPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{FlexVolume: &v1.FlexPersistentVolumeSource{Driver: "d", ReadOnly: false}},
	}}, true)
	o, err := flexOptions(pv)
	if err != nil {
		t.Fatal(err)
	}
	if o != `{"kubernetes.io/fsType":"","kubernetes.io/pvOrVolumeName":"pv-1","kubernetes.io/readwrite":"ro"}` {
		t.Errorf("options = %s", o)
	}
}

func TestFlexNotSupportedAndFailures(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	drv := installFlexDriver(t, dir, "example.com~min", map[string]string{
		"init": success,
	})
	p, err := NewFlex(logger, dir, "example.com~min")
	if err != nil {
		t.Fatal(err)
	}
	spec := flexVolume("v", "example.com/min")
	// Unsupported calls fall back to doing nothing, and are not made again.
	for range 2 {
		if name, err := p.VolumeName(spec); err != nil || name != "v" {
			t.Errorf("VolumeName = %q, %v", name, err)
		}
		if dev, err := p.Attach(ctx, spec, "n"); err != nil || dev != "" {
			t.Errorf("Attach = %q, %v", dev, err)
		}
		if err := p.Detach(ctx, "v", "n"); err != nil {
			t.Errorf("Detach: %v", err)
		}
		if got, err := p.VolumesAreAttached(ctx, []*Spec{spec}, "n"); err != nil || got != nil {
			t.Errorf("VolumesAreAttached = %v, %v; want nil (no verdict)", got, err)
		}
	}
	if got := strings.Join(drv.calls(), ","); got != "init,getvolumename\t"+mustOptions(t, spec)+",attach\t"+mustOptions(t, spec)+"\tn,detach\tv\tn,isattached\t"+mustOptions(t, spec)+"\tn" {
		t.Errorf("calls = %q", got)
	}

	// A failure is an error with the driver's reason.
	drv.write(map[string]string{"init": success, "attach": `{"status":"Failure","message":"disk busy"}`})
	p, err = NewFlex(logger, dir, "example.com~min")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Attach(ctx, spec, "n"); err == nil || err.Error() != "attach command failed, status: Failure, reason: disk busy" {
		t.Errorf("Attach error = %v", err)
	}
	// Output that is not JSON is an error too.
	drv.write(map[string]string{"init": "garbage"})
	if _, err := NewFlex(logger, dir, "example.com~min"); err == nil {
		t.Error("init with garbage output must fail")
	}
	// A driver without attach capability is not attachable.
	drv.write(map[string]string{"init": `{"status":"Success","capabilities":{"attach":false}}`})
	p, err = NewFlex(logger, dir, "example.com~min")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := p.CanAttach(spec); ok {
		t.Error("attach:false driver must not be attachable")
	}
	m := NewManager()
	m.probed[p.Name()] = p
	if m.IsAttachable(spec) {
		t.Error("manager must not attach with an attach:false driver")
	}
}

func mustOptions(t *testing.T, spec *Spec) string {
	t.Helper()
	o, err := flexOptions(spec)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// fakeClock drives the prober's rescan period.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestFlexProber(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	dir := filepath.Join(t.TempDir(), "flex", "exec")
	p, err := NewFlexProber(logger, dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("plugin directory not created: %v", err)
	}
	clock := &fakeClock{t: time.Now()}
	p.now = clock.now
	m := NewManager()
	m.SetProber(logger, p)
	spec := flexVolume("v", "example.com/lvm")
	if _, err := m.FindBySpec(spec); err != ErrNoPluginMatched {
		t.Fatalf("empty directory: %v", err)
	}

	drv := installFlexDriver(t, dir, "example.com~lvm", map[string]string{"init": success})
	// Hidden directories and plain files are not drivers.
	if err := os.MkdirAll(filepath.Join(dir, ".hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m.FindBySpec(spec); err != ErrNoPluginMatched {
		t.Fatal("the directory is read again only after the period")
	}
	clock.t = clock.t.Add(time.Minute)
	got, err := m.FindBySpec(spec)
	if err != nil || got.Name() != "example.com/lvm" {
		t.Fatalf("new driver: %v, %v", got, err)
	}
	if byName, err := m.FindByName("example.com/lvm"); err != nil || byName != got {
		t.Errorf("FindByName = %v, %v", byName, err)
	}
	// Unchanged: init is not run again.
	clock.t = clock.t.Add(time.Minute)
	if again, _ := m.FindBySpec(spec); again != got {
		t.Error("unchanged driver was reloaded")
	}
	if n := len(drv.calls()); n != 1 {
		t.Errorf("init ran %d times", n)
	}

	// Changed: reloaded (init runs again), now without attach.
	drv.write(map[string]string{"init": `{"status":"Success","capabilities":{"attach":false}}`})
	clock.t = clock.t.Add(time.Minute)
	if m.IsAttachable(spec) {
		t.Error("changed driver not reloaded")
	}

	// A driver whose init fails is skipped, and not retried until changed.
	drv.write(map[string]string{"init": `{"status":"Failure"}`})
	clock.t = clock.t.Add(time.Minute)
	_, _ = m.FindBySpec(spec)
	calls := len(drv.calls())
	clock.t = clock.t.Add(time.Minute)
	_, _ = m.FindBySpec(spec)
	if len(drv.calls()) != calls {
		t.Error("failed driver retried without a change")
	}

	// Removed executable, then directory: gone.
	drv.write(map[string]string{"init": success})
	clock.t = clock.t.Add(time.Minute)
	if _, err := m.FindBySpec(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "example.com~lvm", "lvm")); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Minute)
	if _, err := m.FindBySpec(spec); err != ErrNoPluginMatched {
		t.Errorf("driver without executable: %v", err)
	}
	drv.write(map[string]string{"init": success})
	clock.t = clock.t.Add(time.Minute)
	if _, err := m.FindBySpec(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "example.com~lvm")); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Minute)
	if _, err := m.FindBySpec(spec); err != ErrNoPluginMatched {
		t.Errorf("removed driver: %v", err)
	}
}

func TestFlexProberUnusableDirectory(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	if _, err := NewFlexProber(logger, "", time.Second); err == nil {
		t.Error("empty directory name must fail")
	}
	// A path under a file passes (as upstream's); reading it fails, once.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := NewFlexProber(logger, filepath.Join(file, "sub"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Probe(); err == nil {
		t.Error("reading a path under a file must fail")
	}
	if _, err := p.Probe(); err != nil {
		t.Errorf("the same error is reported once: %v", err)
	}
}
