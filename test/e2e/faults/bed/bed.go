// Package bed runs a three-node control plane in Docker containers, each
// node laid out as kubeadm lays out a control-plane node: an etcd member,
// kube-apiserver, kube-scheduler and the controller manager run from
// /etc/kubernetes/manifests with the flags of
// cluster/manifests/kube-controller-manager.yaml. The fault tests and
// hack/multinode.sh use it.
package bed

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Binaries in the node image (test/e2e/faults/image/Dockerfile).
const (
	OursKCM     = "/usr/local/bin/kube-controller-manager"
	UpstreamKCM = "/usr/local/bin/kube-controller-manager-upstream"
	// DefaultImage is what make image-node tags.
	DefaultImage = "kcmclone/control-plane-node:dev"
)

// Options configure a bed.
type Options struct {
	// Prefix names the network, containers and files (kcmfault-...).
	Prefix string
	// Nodes is the number of control-plane nodes (3).
	Nodes int
	// Image is the node image (DefaultImage).
	Image string
	// KCM is the controller manager binary inside the image (OursKCM).
	KCM string
	// KCMExtraFlags follow the manifest's flags (e.g. --v=2).
	KCMExtraFlags []string
	// Dir holds every node's /etc/kubernetes and /var/log/kubernetes.
	Dir string
	// Manifest is cluster/manifests/kube-controller-manager.yaml.
	Manifest string
}

// Node is one control-plane node container.
type Node struct {
	Name string
	IP   string
	// Etc is mounted at /etc/kubernetes, Logs at /var/log/kubernetes.
	Etc, Logs string
	// Kubeconfig is an admin kubeconfig for this node's apiserver, usable
	// from the host.
	Kubeconfig string
}

// Bed is a running multi-node control plane.
type Bed struct {
	Options
	Network string
	Nodes   []*Node
	pki     *pki
	kcmArgs []string
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Docker runs a docker command and returns its trimmed output.
func Docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// manifestCommand is the controller manager's command line in the static
// pod manifest, without the binary.
func manifestCommand(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || len(pod.Spec.Containers) != 1 {
		return nil, fmt.Errorf("%s: want a Pod with one container", path)
	}
	c := pod.Spec.Containers[0]
	return append(append([]string{}, c.Command[1:]...), c.Args...), nil
}

// Start creates the network, the PKI and the node containers and waits
// until every apiserver is ready and a controller manager leads.
func Start(ctx context.Context, o Options) (*Bed, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.KCM == "" {
		o.KCM = OursKCM
	}
	args, err := manifestCommand(o.Manifest)
	if err != nil {
		return nil, err
	}
	b := &Bed{Options: o, Network: o.Prefix + "-net", kcmArgs: args}
	if err := b.start(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// createNetwork makes a bridge network on a /24 no other network uses, so
// nodes get fixed addresses (and keep them across a disconnect).
func (b *Bed) createNetwork() (string, error) {
	var lastErr error
	for range 20 {
		subnet := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(250))
		_, err := Docker("network", "create", "--driver", "bridge", "--subnet", subnet+".0/24",
			"--label", "kcmfault=1", b.Network)
		if err == nil {
			return subnet, nil
		}
		lastErr = err
	}
	return "", lastErr
}

func (b *Bed) start(ctx context.Context) error {
	subnet, err := b.createNetwork()
	if err != nil {
		return err
	}
	if b.pki, err = newPKI(); err != nil {
		return err
	}
	var peers []string
	for i := 1; i <= b.Options.Nodes; i++ {
		n := &Node{Name: fmt.Sprintf("%s-node%d", b.Prefix, i), IP: fmt.Sprintf("%s.%d", subnet, 10+i)}
		n.Etc = filepath.Join(b.Dir, n.Name, "etc")
		n.Logs = filepath.Join(b.Dir, n.Name, "logs")
		n.Kubeconfig = filepath.Join(b.Dir, n.Name, "admin.kubeconfig")
		b.Nodes = append(b.Nodes, n)
		peers = append(peers, fmt.Sprintf("%s=http://%s:2380", n.Name, n.IP))
	}
	for _, n := range b.Nodes {
		if err := b.writeNode(n, strings.Join(peers, ",")); err != nil {
			return err
		}
	}
	for _, n := range b.Nodes {
		if _, err := Docker("run", "-d", "--name", n.Name, "--hostname", n.Name, "--label", "kcmfault=1",
			"--network", b.Network, "--ip", n.IP,
			"-v", n.Etc+":/etc/kubernetes", "-v", n.Logs+":/var/log/kubernetes", b.Image); err != nil {
			return err
		}
	}
	for _, n := range b.Nodes {
		if err := b.WaitReady(ctx, n, 3*time.Minute); err != nil {
			return err
		}
	}
	_, _, err = b.WaitLeader(ctx, b.Nodes[0], "", 3*time.Minute)
	return err
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted"]
rules:
- level: None
  verbs: ["get", "list", "watch"]
- level: Metadata
`

func (b *Bed) writeNode(n *Node, peers string) error {
	for _, d := range []string{filepath.Join(n.Etc, "manifests"), n.Logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := b.pki.writeNode(n.Etc, n.Name, net.ParseIP(n.IP)); err != nil {
		return err
	}
	// In-node components talk to their own apiserver on loopback, which
	// stays up when the node is cut off (as a node's own address would).
	for _, f := range []string{"controller-manager.conf", "scheduler.conf", "admin.conf"} {
		kc, err := b.pki.kubeconfig(f, "https://127.0.0.1:6443")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.Etc, f), kc, 0o600); err != nil {
			return err
		}
	}
	kc, err := b.pki.kubeconfig("admin.conf", "https://"+n.IP+":6443")
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Etc, "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	manifests := map[string][]string{
		"etcd": {"/usr/local/bin/etcd", "--name=" + n.Name, "--data-dir=/var/lib/etcd",
			"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://" + n.IP + ":2379",
			"--listen-peer-urls=http://0.0.0.0:2380", "--initial-advertise-peer-urls=http://" + n.IP + ":2380",
			"--initial-cluster=" + peers, "--initial-cluster-state=new", "--initial-cluster-token=" + b.Prefix,
			"--log-level=warn"},
		"kube-apiserver": {"/usr/local/bin/kube-apiserver", "--advertise-address=" + n.IP,
			"--allow-privileged=true", "--authorization-mode=Node,RBAC", "--client-ca-file=/etc/kubernetes/pki/ca.crt",
			"--enable-admission-plugins=NodeRestriction", "--enable-bootstrap-token-auth=true",
			"--etcd-servers=http://127.0.0.1:2379",
			"--proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt",
			"--proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key",
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User", "--secure-port=6443",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=/etc/kubernetes/pki/sa.pub",
			"--service-account-signing-key-file=/etc/kubernetes/pki/sa.key",
			"--service-cluster-ip-range=10.96.0.0/12",
			"--tls-cert-file=/etc/kubernetes/pki/apiserver.crt", "--tls-private-key-file=/etc/kubernetes/pki/apiserver.key",
			"--audit-policy-file=/etc/kubernetes/audit-policy.yaml", "--audit-log-path=/var/log/kubernetes/audit.log",
			"--audit-log-maxsize=500"},
		"kube-scheduler": {"/usr/local/bin/kube-scheduler", "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
			"--authorization-kubeconfig=/etc/kubernetes/scheduler.conf", "--bind-address=127.0.0.1",
			"--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"},
		"kube-controller-manager": b.kcmCommand(b.KCM),
	}
	for name, argv := range manifests {
		if err := writeManifest(n, name, argv); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bed) kcmCommand(binary string) []string {
	return append(append([]string{binary}, b.kcmArgs...), b.KCMExtraFlags...)
}

func writeManifest(n *Node, name string, argv []string) error {
	j, err := json.Marshal(argv)
	if err != nil {
		return err
	}
	// Written whole then renamed: node-init never reads half a manifest.
	tmp := filepath.Join(n.Etc, "manifests", "."+name+".tmp")
	if err := os.WriteFile(tmp, j, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(n.Etc, "manifests", name+".json"))
}

// SetKCM replaces the node's controller manager with binary (OursKCM or
// UpstreamKCM), as an operator edits the static pod manifest: node-init
// stops the old process (SIGTERM) and starts the new one.
func (b *Bed) SetKCM(n *Node, binary string) error {
	return writeManifest(n, "kube-controller-manager", b.kcmCommand(binary))
}

// Config is an admin client config for the node's apiserver.
func (b *Bed) Config(n *Node) (*rest.Config, error) {
	c, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c.QPS, c.Burst = 200, 400
	return c, nil
}

// Client is an admin clientset for the node's apiserver.
func (b *Bed) Client(n *Node) (clientset.Interface, error) {
	c, err := b.Config(n)
	if err != nil {
		return nil, err
	}
	return clientset.NewForConfig(c)
}

// WaitReady waits for the node's apiserver /readyz.
func (b *Bed) WaitReady(ctx context.Context, n *Node, timeout time.Duration) error {
	c, err := b.Client(n)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: apiserver not ready after %s (logs in %s): %w", n.Name, timeout, n.Logs, err)
	}
	return nil
}

// Leader is the node whose controller manager holds the Lease, and the
// holder identity (node name, "_", a UUID).
func (b *Bed) Leader(ctx context.Context, via *Node) (*Node, string, error) {
	c, err := b.Client(via)
	if err != nil {
		return nil, "", err
	}
	l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return nil, "", nil
	}
	id := *l.Spec.HolderIdentity
	for _, n := range b.Nodes {
		if strings.HasPrefix(id, n.Name+"_") {
			return n, id, nil
		}
	}
	return nil, id, fmt.Errorf("lease holder %q is no node of the bed", id)
}

// WaitLeader waits, asking via's apiserver, for a holder other than
// not, and returns its node and identity.
func (b *Bed) WaitLeader(ctx context.Context, via *Node, not string, timeout time.Duration) (*Node, string, error) {
	var node *Node
	var id string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, h, err := b.Leader(ctx, via)
		if err != nil {
			return false, nil // not there yet, or via is unreachable for now
		}
		node, id = n, h
		return n != nil && h != not, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("no new kube-controller-manager leader (was %q) after %s: %w", not, timeout, err)
	}
	return node, id, nil
}

// Other is a node other than those given.
func (b *Bed) Other(not ...*Node) *Node {
	for _, n := range b.Nodes {
		skip := false
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			return n
		}
	}
	return nil
}

// Kill stops the node's container hard (SIGKILL to everything in it).
func (b *Bed) Kill(n *Node) error { _, err := Docker("kill", n.Name); return err }

// Disconnect cuts the node off the network; its processes keep running.
func (b *Bed) Disconnect(n *Node) error {
	_, err := Docker("network", "disconnect", b.Network, n.Name)
	return err
}

// Connect puts the node back on the network with its address.
func (b *Bed) Connect(n *Node) error {
	_, err := Docker("network", "connect", "--ip", n.IP, b.Network, n.Name)
	return err
}

// Signal sends sig (STOP, CONT, ...) to the node's processes running
// binary (e.g. kube-apiserver).
func (b *Bed) Signal(n *Node, sig, binary string) error {
	_, err := Docker("exec", n.Name, "/usr/local/bin/node-init", "signal", sig, binary)
	return err
}

// Log is a component's log on the node (kube-controller-manager, ...).
func (b *Bed) Log(n *Node, component string) string {
	out, _ := os.ReadFile(filepath.Join(n.Logs, component+".log"))
	return string(out)
}

// AuditEvent is the part of an audit event the fault tests read.
type AuditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// Audit reads the node apiserver's audit log.
func (b *Bed) Audit(n *Node) ([]AuditEvent, error) {
	f, err := os.Open(filepath.Join(n.Logs, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []AuditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			continue // a line cut short by a kill
		}
		out = append(out, e)
	}
	return out, s.Err()
}

// Close removes the containers and the network.
func (b *Bed) Close() {
	for _, n := range b.Nodes {
		_, _ = Docker("rm", "-f", n.Name)
	}
	_, _ = Docker("network", "rm", b.Network)
}

// Cleanup removes whatever a bed with this prefix left (an interrupted run).
func Cleanup(prefix string) error {
	ids, err := Docker("ps", "-aq", "--filter", "label=kcmfault=1", "--filter", "name="+prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(ids) {
		if _, err := Docker("rm", "-f", id); err != nil {
			errs = append(errs, err)
		}
	}
	nets, err := Docker("network", "ls", "-q", "--filter", "label=kcmfault=1", "--filter", "name="+prefix)
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(nets) {
		if _, err := Docker("network", "rm", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
