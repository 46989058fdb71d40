// Command node-init is PID 1 of a control-plane node container of the
// fault bed (the image has no shell). It plays the kubelet's part for
// static pods: every file in /etc/kubernetes/manifests is one process
// (a JSON array: the command line), started at boot, restarted when it
// exits, stopped and restarted when its file changes, stopped when its
// file goes. Each process logs to /var/log/kubernetes/<name>.log.
//
//	node-init                     supervise (the entrypoint)
//	node-init signal SIG NAME     send SIG (STOP, CONT, TERM, KILL) to the
//	                              processes whose binary is NAME (docker exec)
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	manifestDir = "/etc/kubernetes/manifests"
	logDir      = "/var/log/kubernetes"
	// Like the kubelet's terminationGracePeriodSeconds default.
	gracePeriod = 30 * time.Second
	maxBackoff  = 10 * time.Second
)

var signals = map[string]syscall.Signal{
	"STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL,
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "signal" {
		n, err := signalByName(os.Args[2], os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("signalled %d process(es)\n", n)
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: node-init | node-init signal STOP|CONT|TERM|KILL NAME")
		os.Exit(2)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := &supervisor{procs: map[string]*proc{}}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	reap := make(chan os.Signal, 1)
	signal.Notify(reap, syscall.SIGCHLD)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	s.sync()
	for {
		select {
		case <-term:
			logf("stopping all processes")
			s.stopAll()
			return
		case <-reap:
			// Orphans re-parented to PID 1; our own children are
			// waited for by their exec.Cmd.
			reapOrphans(s)
		case <-tick.C:
			s.sync()
		}
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s node-init: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// proc is one supervised process and the manifest it runs.
type proc struct {
	name     string
	spec     []byte
	argv     []string
	stop     chan struct{}
	stopped  chan struct{}
	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
}

type supervisor struct {
	mu    sync.Mutex
	procs map[string]*proc
}

// sync brings the running processes in line with the manifest directory.
func (s *supervisor) sync() {
	want := map[string][]byte{}
	entries, _ := os.ReadDir(manifestDir)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(manifestDir, e.Name()))
		if err != nil {
			continue
		}
		want[strings.TrimSuffix(e.Name(), ".json")] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, p := range s.procs {
		if spec, ok := want[name]; !ok || !bytes.Equal(spec, p.spec) {
			logf("manifest of %s changed or went: stopping it", name)
			p.terminate()
			delete(s.procs, name)
		}
	}
	for name, spec := range want {
		if _, ok := s.procs[name]; ok {
			continue
		}
		var argv []string
		if err := json.Unmarshal(spec, &argv); err != nil || len(argv) == 0 {
			logf("manifest %s: want a JSON array of strings (the command line): %v", name, err)
			continue
		}
		p := &proc{name: name, spec: spec, argv: argv, stop: make(chan struct{}), stopped: make(chan struct{})}
		s.procs[name] = p
		go p.run()
	}
}

func (s *supervisor) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range s.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.terminate() }()
	}
	wg.Wait()
}

func (s *supervisor) owns(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		p.mu.Lock()
		mine := p.cmd != nil && p.cmd.Process != nil && p.cmd.Process.Pid == pid
		p.mu.Unlock()
		if mine {
			return true
		}
	}
	return false
}

// run starts the process and restarts it whenever it exits, with a
// backoff that grows while it keeps failing fast, until stop closes.
func (p *proc) run() {
	defer close(p.stopped)
	backoff := time.Second
	for {
		started := time.Now()
		code := p.once()
		select {
		case <-p.stop:
			return
		default:
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		p.restarts++
		logf("%s exited (%s); restart %d in %s", p.name, code, p.restarts, backoff)
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (p *proc) once() string {
	f, err := os.OpenFile(filepath.Join(logDir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	p.mu.Lock()
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return err.Error()
	}
	p.cmd = cmd
	p.mu.Unlock()
	logf("started %s (pid %d)", p.name, cmd.Process.Pid)
	err = cmd.Wait()
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// terminate stops the process as the kubelet stops a container: SIGTERM,
// then SIGKILL after the grace period; no restart follows.
func (p *proc) terminate() {
	close(p.stop)
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot act on SIGTERM
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.stopped:
	case <-time.After(gracePeriod):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-p.stopped
	}
}

// reapOrphans waits for exited processes that are not our direct
// children's exec.Cmd (they reap their own).
func reapOrphans(s *supervisor) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || s.owns(pid) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state, ppid.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 2 && f[0] == "Z" && f[1] == "1" {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// signalByName signals every process whose argv[0] has base name name.
func signalByName(sigName, name string) (int, error) {
	sig, ok := signals[strings.ToUpper(strings.TrimPrefix(strings.ToUpper(sigName), "SIG"))]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", sigName)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv0 := string(bytes.SplitN(b, []byte{0}, 2)[0])
		if filepath.Base(argv0) != name {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil {
			return n, fmt.Errorf("signal %d: %w", pid, err)
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no process named %s", name)
	}
	return n, nil
}
