// Package framework runs a real etcd and kube-apiserver for integration
// tests: one control plane per test package, a fresh namespace per test.
package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identities the control plane's static token file knows.
const (
	AdminUser = "admin"
	// ViewerUser is authenticated but belongs to no privileged group, so it
	// only gets what RBAC grants it explicitly.
	ViewerUser = "viewer"
)

// ControlPlane is a running etcd + kube-apiserver pair.
type ControlPlane struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// URL is the apiserver's https address.
	URL string
	// Tokens maps AdminUser and ViewerUser to their bearer tokens.
	Tokens map[string]string
	// Dir holds the control plane's files: certificates, keys, data,
	// logs and an admin kubeconfig (Kubeconfig).
	Dir        string
	Kubeconfig string
	// ServiceAccountKeyFile is the private key the apiserver signs service
	// account tokens with (the controller manager's --service-account-private-key-file).
	ServiceAccountKeyFile string

	// apiServerFlags are added to kube-apiserver's command line.
	apiServerFlags []string

	procs []*child
	once  sync.Once
}

// Options changes how StartControlPlaneWithOptions starts the control plane.
type Options struct {
	// APIServerFlags are appended to kube-apiserver's flags, for example
	// --feature-gates=... or --runtime-config=... for APIs off by default.
	APIServerFlags []string
}

// child is a started process; done closes once it has exited, after which
// state is safe to read.
type child struct {
	name  string
	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState
}

// BinDir is where hack/install-test-binaries.sh puts the upstream binaries.
// KCM_TEST_BIN_DIR overrides it.
func BinDir() string {
	if d := os.Getenv("KCM_TEST_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "_output", "bin")
}

// RepoRoot is the checkout this package was compiled from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func binary(name string) (string, error) {
	p := filepath.Join(BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in %s: run hack/install-test-binaries.sh (make test does it)", name, BinDir())
	}
	return p, nil
}

// handedOut remembers every port this process has been given, so two
// picks in a row never return the same port (the kernel may hand out a
// just-closed port again).
var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// FreePort asks the kernel for an unused loopback port that this process
// has not been given before. The port is free when returned, but nothing
// holds it: prefer ReservePorts when the caller starts the listener itself.
func FreePort() (int, error) {
	r, err := ReservePorts(1)
	if err != nil {
		return 0, err
	}
	r.Release()
	return r.Ports[0], nil
}

// Reservation holds listeners on distinct free loopback ports until
// Release, so nothing else can take them while a command line is built.
type Reservation struct {
	Ports     []int
	listeners []net.Listener
}

// ReservePorts binds n distinct loopback ports (none handed out earlier in
// this process) and keeps them bound until Release.
func ReservePorts(n int) (*Reservation, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	r := &Reservation{}
	var skipped []net.Listener
	defer func() {
		for _, l := range skipped {
			_ = l.Close()
		}
	}()
	for len(r.Ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.Release()
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut[port] {
			// Keep it bound until done so the kernel offers another.
			skipped = append(skipped, l)
			if len(skipped) > 1000 {
				r.Release()
				return nil, errors.New("no unused loopback port left")
			}
			continue
		}
		handedOut[port] = true
		r.Ports = append(r.Ports, port)
		r.listeners = append(r.listeners, l)
	}
	return r, nil
}

// Release closes the listeners; call it right before starting the process
// that binds the ports.
func (r *Reservation) Release() {
	for _, l := range r.listeners {
		_ = l.Close()
	}
	r.listeners = nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StartControlPlane starts etcd and kube-apiserver under a new temporary
// directory and waits until the apiserver reports ready.
func StartControlPlane(ctx context.Context) (*ControlPlane, error) {
	return StartControlPlaneWithOptions(ctx, Options{})
}

// StartControlPlaneWithOptions is StartControlPlane with extra settings.
func StartControlPlaneWithOptions(ctx context.Context, opts Options) (*ControlPlane, error) {
	dir, err := os.MkdirTemp("", "kcm-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, Tokens: map[string]string{AdminUser: randomToken(), ViewerUser: randomToken()},
		apiServerFlags: opts.APIServerFlags}
	if err := cp.start(ctx); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	etcdBin, err := binary("etcd")
	if err != nil {
		return err
	}
	apiserverBin, err := binary("kube-apiserver")
	if err != nil {
		return err
	}

	etcdURL, err := cp.startEtcd(ctx, etcdBin)
	if err != nil {
		return err
	}

	cp.ServiceAccountKeyFile = filepath.Join(cp.Dir, "sa.key")
	if err := writeRSAKey(cp.ServiceAccountKeyFile); err != nil {
		return err
	}
	tokenFile := filepath.Join(cp.Dir, "tokens.csv")
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		cp.Tokens[AdminUser], AdminUser, AdminUser, cp.Tokens[ViewerUser], ViewerUser, ViewerUser)
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := cp.startAPIServer(ctx, apiserverBin, etcdURL, tokenFile)
		if err == nil || attempt == 3 || !cp.lostPortRace("kube-apiserver") {
			return err
		}
	}
}

// startAPIServer starts kube-apiserver on a reserved port and waits until
// it is ready.
func (cp *ControlPlane) startAPIServer(ctx context.Context, apiserverBin, etcdURL, tokenFile string) error {
	ports, err := ReservePorts(1)
	if err != nil {
		return err
	}
	port := ports.Ports[0]
	certDir := filepath.Join(cp.Dir, "apiserver-certs")
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.ServiceAccountKeyFile,
		"--service-account-signing-key-file=" + cp.ServiceAccountKeyFile,
		"--service-cluster-ip-range=10.0.0.0/16",
		// A loopback apiserver cannot publish itself as the kubernetes Service endpoint.
		"--endpoint-reconciler-type=none",
		// Nothing creates "default" ServiceAccounts unless the serviceaccount
		// controller runs, so pod admission must not require them.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		"--storage-media-type=application/vnd.kubernetes.protobuf",
	}
	// Later flags win, so a test's flags override the defaults above.
	args = append(args, cp.apiServerFlags...)
	ports.Release()
	if err := cp.spawn(ctx, "kube-apiserver", apiserverBin, args); err != nil {
		return err
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Tokens[AdminUser],
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             500,
		Burst:           1000,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.Kubeconfig, cp.URL, cp.Tokens[AdminUser]); err != nil {
		return err
	}
	return cp.waitReady(ctx, "/readyz", 90*time.Second)
}

// startEtcd starts etcd on two reserved ports, and again on new ones if
// something took a port between the reservation's release and etcd's bind.
func (cp *ControlPlane) startEtcd(ctx context.Context, bin string) (string, error) {
	for attempt := 1; ; attempt++ {
		url, err := cp.startEtcdOnce(ctx, bin)
		if err == nil || attempt == 3 || !cp.lostPortRace("etcd") {
			return url, err
		}
		_ = os.RemoveAll(filepath.Join(cp.Dir, "etcd"))
	}
}

func (cp *ControlPlane) startEtcdOnce(ctx context.Context, bin string) (string, error) {
	ports, err := ReservePorts(2)
	if err != nil {
		return "", err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports.Ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports.Ports[1])
	args := []string{
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// Tests throw their data away; durability only costs time.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	ports.Release()
	if err := cp.spawn(ctx, "etcd", bin, args); err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(clientURL + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return clientURL, nil
			}
		}
		if err := cp.exited(); err != nil {
			return "", err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("etcd did not become healthy in 30s; see %s", cp.logPath("etcd"))
}

// lostPortRace reports whether the last child, name, exited because its
// port was taken; if so it is forgotten so the caller can start it again.
func (cp *ControlPlane) lostPortRace(name string) bool {
	if len(cp.procs) == 0 {
		return false
	}
	last := cp.procs[len(cp.procs)-1]
	if last.name != name {
		return false
	}
	select {
	case <-last.done:
	default:
		return false
	}
	if !strings.Contains(cp.Logs(name, 1<<16), "address already in use") {
		return false
	}
	cp.procs = cp.procs[:len(cp.procs)-1]
	return true
}

func (cp *ControlPlane) logPath(name string) string { return filepath.Join(cp.Dir, name+".log") }

// spawn starts a child in its own process group so Stop can end it and
// everything it started.
func (cp *ControlPlane) spawn(_ context.Context, name, bin string, args []string) error {
	logFile, err := os.Create(cp.logPath(name))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		c.state = cmd.ProcessState
		close(c.done)
	}()
	cp.procs = append(cp.procs, c)
	return nil
}

// exited reports a child that died during start-up.
func (cp *ControlPlane) exited() error {
	for _, p := range cp.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited early (%s); see %s", p.name, p.state, cp.logPath(p.name))
		default:
		}
	}
	return nil
}

func (cp *ControlPlane) waitReady(ctx context.Context, path string, timeout time.Duration) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: insecureTransport()}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+cp.Tokens[AdminUser])
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := cp.exited(); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (last: %s); see %s", timeout, last, cp.logPath("kube-apiserver"))
}

// Stop ends every process and removes the control plane's directory
// (kept when KCM_TEST_KEEP_DIR is set, for post-mortems).
func (cp *ControlPlane) Stop() {
	cp.once.Do(func() {
		for i := len(cp.procs) - 1; i >= 0; i-- {
			p := cp.procs[i]
			pid := p.cmd.Process.Pid
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				<-p.done
			}
		}
		if os.Getenv("KCM_TEST_KEEP_DIR") == "" {
			_ = os.RemoveAll(cp.Dir)
		}
	})
}

// Logs returns the tail of a component's log, for failure messages.
func (cp *ControlPlane) Logs(name string, maxBytes int) string {
	b, err := os.ReadFile(cp.logPath(name))
	if err != nil {
		return err.Error()
	}
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return string(b)
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}

// WriteKubeconfig writes a token kubeconfig for server (TLS unverified:
// the test apiserver's certificate is self-signed).
func WriteKubeconfig(path, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// TokenKubeconfig writes a kubeconfig for the given identity under Dir.
func (cp *ControlPlane) TokenKubeconfig(user string) (string, error) {
	tok, ok := cp.Tokens[user]
	if !ok {
		return "", errors.New("unknown user " + user)
	}
	p := filepath.Join(cp.Dir, strings.ToLower(user)+".kubeconfig")
	return p, WriteKubeconfig(p, cp.URL, tok)
}
