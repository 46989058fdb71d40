// Command multinode starts the fault bed's control plane (package bed) for
// a user: N control-plane node containers and kwok nodes on the host,
// until interrupted. hack/multinode.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kcmclone/kube-controller-manager/test/e2e/faults/bed"
)

func main() {
	root := flag.String("root", ".", "repository root")
	nodes := flag.Int("nodes", 3, "control-plane nodes")
	kwokNodes := flag.Int("kwok-nodes", 3, "kwok (fake worker) nodes")
	image := flag.String("image", bed.DefaultImage, "node image (make image-node)")
	upstream := flag.Bool("upstream", false, "run upstream's kube-controller-manager instead of ours")
	prefix := flag.String("prefix", "kcmfault-run", "name prefix of the containers and network")
	flag.Parse()
	if err := run(*root, *prefix, *image, *nodes, *kwokNodes, *upstream); err != nil {
		fmt.Fprintln(os.Stderr, "multinode:", err)
		os.Exit(1)
	}
}

func run(root, prefix, image string, nodes, kwokNodes int, upstream bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if err := bed.Cleanup(prefix + "-"); err != nil {
		return err
	}
	dir := filepath.Join(root, "_output", "multinode")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	kcm := bed.OursKCM
	if upstream {
		kcm = bed.UpstreamKCM
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	fmt.Fprintf(os.Stderr, "+++ [multinode] starting %d control-plane nodes (%s), files in %s\n", nodes, image, dir)
	b, err := bed.Start(startCtx, bed.Options{Prefix: prefix, Nodes: nodes, Image: image, KCM: kcm, Dir: dir,
		Manifest: filepath.Join(root, "cluster", "manifests", "kube-controller-manager.yaml")})
	if err != nil {
		return err
	}
	defer b.Close()
	cmd, err := b.Kwok(startCtx, root, filepath.Join(root, "_output", "bin", "kwok"), b.Nodes[0], kwokNodes)
	if err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill() }()
	leader, id, _ := b.Leader(startCtx, b.Nodes[0])
	fmt.Println()
	fmt.Println("Three-node control plane is up.")
	for _, n := range b.Nodes {
		fmt.Printf("  %s  %s  kubeconfig %s  logs %s\n", n.Name, n.IP, n.Kubeconfig, n.Logs)
	}
	if leader != nil {
		fmt.Printf("kube-controller-manager leader: %s (%s)\n", leader.Name, id)
	}
	fmt.Printf("kwok (%d fake nodes) runs against %s; log %s\n", kwokNodes, b.Nodes[0].Name, filepath.Join(dir, "kwok.log"))
	fmt.Printf("  export KUBECONFIG=%s\n", b.Nodes[0].Kubeconfig)
	fmt.Println("  kubectl -n kube-system get leases; docker kill <leader>  # try a fault")
	fmt.Println("Press Ctrl-C to stop and remove the containers.")
	fmt.Println(b.Nodes[0].Kubeconfig)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "+++ [multinode] stopping")
	return nil
}
