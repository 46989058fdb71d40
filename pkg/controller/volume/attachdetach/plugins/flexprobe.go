package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	utilstrings "k8s.io/utils/strings"
)

// DefaultFlexRescanPeriod is how often, at most, the flex volume plugin
// directory is read again to find new, changed and removed drivers.
const DefaultFlexRescanPeriod = time.Second

// FlexProber finds FlexVolume drivers: each directory of the plugin
// directory whose name does not start with "." holds one. A driver is
// (re)loaded, running its "init", when its directory first appears or
// anything in it changes, and dropped when the directory or its executable
// goes. Upstream watches the directory with inotify; this polls it, at most
// once per period, on plugin lookups.
type FlexProber struct {
	logger klog.Logger
	dir    string
	period time.Duration
	now    func() time.Time

	mu       sync.Mutex
	lastScan time.Time
	// seen is each driver directory's last fingerprint.
	seen map[string]string
	// readErr is the last error reading the directory.
	readErr string
}

// NewFlexProber creates the plugin directory if it is missing, as the
// kubelet and upstream's controller do, and returns its prober.
func NewFlexProber(logger klog.Logger, dir string, period time.Duration) (*FlexProber, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		logger.Info("Flexvolume plugin directory does not exist. Recreating.", "path", dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("error (re-)creating driver directory: %s", err)
		}
	}
	return &FlexProber{logger: logger, dir: dir, period: period, now: time.Now, seen: map[string]string{}}, nil
}

// Probe reports the drivers that appeared, changed or went since the last
// scan. A driver whose init fails is reported in the error and retried
// only once its directory changes.
func (p *FlexProber) Probe() ([]ProbeEvent, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if !p.lastScan.IsZero() && now.Sub(p.lastScan) < p.period {
		return nil, nil
	}
	p.lastScan = now

	entries, err := os.ReadDir(p.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Recreate it, as upstream does when its watch sees it go.
			if merr := os.MkdirAll(p.dir, 0o755); merr != nil {
				return nil, fmt.Errorf("error (re-)creating driver directory: %s", merr)
			}
			entries = nil
		} else {
			// Reported once, not on every lookup.
			msg := fmt.Sprintf("error reading the Flexvolume directory: %s", err)
			if msg == p.readErr {
				return nil, nil
			}
			p.readErr = msg
			return nil, errors.New(msg)
		}
	}
	p.readErr = ""
	var events []ProbeEvent
	var errs []error
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		present[name] = true
		fp := p.fingerprint(name)
		if old, ok := p.seen[name]; ok && old == fp {
			continue
		}
		_, wasSeen := p.seen[name]
		p.seen[name] = fp
		if !p.hasExecutable(name) {
			if wasSeen {
				events = append(events, ProbeEvent{Name: utilstrings.UnescapeQualifiedName(name), Remove: true})
			}
			continue
		}
		plugin, err := NewFlex(p.logger, p.dir, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("error creating Flexvolume plugin from directory %s, skipping. Error: %s", name, err))
			continue
		}
		events = append(events, ProbeEvent{Plugin: plugin, Name: plugin.Name()})
	}
	for name := range p.seen {
		if !present[name] {
			delete(p.seen, name)
			events = append(events, ProbeEvent{Name: utilstrings.UnescapeQualifiedName(name), Remove: true})
		}
	}
	return events, utilerrors.NewAggregate(errs)
}

// hasExecutable: <dir>/<vendor~driver>/<driver> exists.
func (p *FlexProber) hasExecutable(dirName string) bool {
	parts := strings.Split(dirName, "~")
	_, err := os.Stat(filepath.Join(p.dir, dirName, parts[len(parts)-1]))
	return err == nil
}

// fingerprint sums up the names, sizes, modes and times of everything in a
// driver directory, so that any change (a new binary, a config file)
// reloads the driver.
func (p *FlexProber) fingerprint(dirName string) string {
	var b strings.Builder
	root := filepath.Join(p.dir, dirName)
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fmt.Fprintf(&b, "%s|%d|%v|%d\n", path, info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	return b.String()
}
