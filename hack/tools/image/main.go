// Command image builds a single-layer container image from a root
// filesystem directory and writes it as a `docker load`-able tarball and,
// optionally, an OCI image layout, with no container engine involved.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fl := flag.NewFlagSet("image", flag.ContinueOnError)
	rootfs := fl.String("rootfs", "", "directory whose contents become the image's filesystem")
	tag := fl.String("tag", "", "image reference, e.g. kcmclone/kube-controller-manager:v1.37.2")
	out := fl.String("o", "", "path of the docker-loadable tarball to write")
	ociDir := fl.String("oci-layout", "", "also write an OCI image layout to this directory")
	entrypoint := fl.String("entrypoint", "", "absolute path of the entrypoint inside the image")
	user := fl.String("user", "0", "default user")
	arch := fl.String("arch", "amd64", "architecture of the binaries in rootfs")
	created := fl.String("created", "", "creation time (RFC 3339); default the Unix epoch, for reproducible builds")
	var labels, env multi
	fl.Var(&labels, "label", "key=value label (repeatable)")
	fl.Var(&env, "env", "KEY=value environment variable (repeatable)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *rootfs == "" || *tag == "" || *out == "" || *entrypoint == "" {
		return errors.New("-rootfs, -tag, -o and -entrypoint are required")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("bad -tag: %w", err)
	}
	when := time.Unix(0, 0).UTC()
	if *created != "" {
		if when, err = time.Parse(time.RFC3339, *created); err != nil {
			return fmt.Errorf("bad -created: %w", err)
		}
	}

	layerTar, err := tarDir(*rootfs)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "hack/tools/image", Comment: "rootfs " + filepath.Base(*rootfs)},
	})
	if err != nil {
		return err
	}
	lbl := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("bad -label %q: want key=value", l)
		}
		lbl[k] = v
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = *arch, "linux"
	cf.Created = v1.Time{Time: when}
	cf.Config.Entrypoint = []string{*entrypoint}
	cf.Config.Env = env
	cf.Config.User = *user
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = lbl
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}

	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if *ociDir != "" {
		if err := os.RemoveAll(*ociDir); err != nil {
			return err
		}
		p, err := layout.Write(*ociDir, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.Name(),
		})); err != nil {
			return fmt.Errorf("writing OCI layout %s: %w", *ociDir, err)
		}
	}
	d, _ := img.Digest()
	fmt.Printf("%s %s\n", ref.Name(), d)
	return nil
}

// tarDir archives dir's tree with root ownership and fixed times, in a
// stable order, keeping modes (the sticky /tmp included).
func tarDir(dir string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, f)
			_ = f.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
