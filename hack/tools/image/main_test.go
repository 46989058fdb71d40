package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The tarball loads back with the configuration asked for, and its layer
// holds the rootfs owned by root with modes kept (a sticky /tmp).
func TestRun(t *testing.T) {
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"usr/local/bin", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/local/bin/kcm"), []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/:/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.tar")
	oci := filepath.Join(t.TempDir(), "oci")
	err := run([]string{"-rootfs", root, "-tag", "example/kcm:v1", "-o", out, "-oci-layout", oci,
		"-entrypoint", "/usr/local/bin/kcm", "-user", "0:0", "-label", "org.opencontainers.image.version=v1", "-env", "PATH=/usr/local/bin"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/kcm" {
		t.Errorf("entrypoint %v", got)
	}
	if cf.Config.User != "0:0" || cf.Config.Labels["org.opencontainers.image.version"] != "v1" || len(cf.Config.Env) != 1 {
		t.Errorf("config %+v", cf.Config)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	for _, name := range []string{"etc/", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/kcm"} {
		h, ok := entries[name]
		if !ok {
			t.Errorf("layer lacks %s (has %v)", name, entries)
			continue
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", name, h.Uid, h.Gid)
		}
	}
	if h := entries["tmp/"]; h != nil && h.Mode&0o7777 != 0o1777 {
		t.Errorf("tmp mode %o, want 1777", h.Mode&0o7777)
	}
	if h := entries["usr/local/bin/kcm"]; h != nil && h.Mode&0o777 != 0o755 {
		t.Errorf("binary mode %o", h.Mode&0o777)
	}
	p, err := layout.FromPath(oci)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("OCI layout index: %v, %v", m, err)
	}
}

func TestRunRejectsMissingFlags(t *testing.T) {
	if err := run([]string{"-tag", "x:y"}); err == nil {
		t.Fatal("want an error without -rootfs, -o and -entrypoint")
	}
}
