package bed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kwok runs kwok on the host against one node's apiserver, with the
// stages hack/local-up.sh loads, and registers count fake nodes for it.
// root is the repository root; kwok is its binary.
func (b *Bed) Kwok(ctx context.Context, root, kwok string, via *Node, count int) (*exec.Cmd, error) {
	c, err := b.Client(via)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig=" + via.Kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1"}
	for _, glob := range []string{"_output/kwok-stages/*.yaml", "hack/kwok/*.yaml"} {
		files, _ := filepath.Glob(filepath.Join(root, glob))
		for _, f := range files {
			args = append(args, "--config="+f)
		}
	}
	log, err := os.Create(filepath.Join(b.Dir, "kwok.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(kwok, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); _ = log.Close() }()
	pods := resource.MustParse("250")
	for i := range count {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: pods},
				Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: pods},
			},
		}
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			_ = cmd.Process.Kill()
			return nil, err
		}
	}
	return cmd, nil
}
