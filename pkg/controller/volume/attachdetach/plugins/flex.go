package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	utilstrings "k8s.io/utils/strings"
)

// FlexVolume driver commands the controller runs, and the option keys of
// the JSON document describing the volume (the protocol kubelets speak too).
const (
	flexInit          = "init"
	flexGetVolumeName = "getvolumename"
	flexIsAttached    = "isattached"
	flexAttach        = "attach"
	flexDetach        = "detach"

	flexOptionFSType         = "kubernetes.io/fsType"
	flexOptionReadWrite      = "kubernetes.io/readwrite"
	flexOptionPVorVolumeName = "kubernetes.io/pvOrVolumeName"
)

// Driver reply statuses.
const (
	FlexStatusSuccess      = "Success"
	FlexStatusNotSupported = "Not supported"
)

// The driver's own words, compared by isFlexNotSupported.
var errFlexNotSupported = errors.New(FlexStatusNotSupported) //nolint:staticcheck // ST1005: the protocol's status string, verbatim

func isFlexNotSupported(err error) bool {
	return err != nil && err.Error() == FlexStatusNotSupported
}

// flexStatus is a driver's JSON reply.
type flexStatus struct {
	Status       string            `json:"status"`
	Message      string            `json:"message,omitempty"`
	DevicePath   string            `json:"device,omitempty"`
	Attached     bool              `json:"attached,omitempty"`
	Capabilities *flexCapabilities `json:"capabilities,omitempty"`
}

// flexCapabilities is the part of what "init" reports that matters to
// the controller; a driver that leaves attach out has it.
type flexCapabilities struct {
	Attach bool `json:"attach"`
}

func defaultFlexCapabilities() *flexCapabilities {
	return &flexCapabilities{Attach: true}
}

// parseFlexReply turns a driver's output into its status; a reply that is
// not a success is an error ("Not supported" exactly, or a description).
func parseFlexReply(logger klog.Logger, cmd string, output []byte) (*flexStatus, error) {
	status := flexStatus{Capabilities: defaultFlexCapabilities()}
	if err := json.Unmarshal(output, &status); err != nil {
		logger.Error(err, "Failed to unmarshal output for command", "command", cmd, "output", string(output))
		return nil, err
	}
	switch status.Status {
	case FlexStatusSuccess:
		return &status, nil
	case FlexStatusNotSupported:
		logger.V(5).Info("Command is not supported by the driver", "command", cmd)
		return nil, errFlexNotSupported
	}
	err := fmt.Errorf("%s command failed, status: %s, reason: %s", cmd, status.Status, status.Message)
	logger.Error(err, "FlexVolume driver command failed")
	return nil, err
}

// Flex is one FlexVolume driver, "<vendor>/<driver>", installed as
// <plugin dir>/<vendor>~<driver>/<driver>. Its plugin name is the driver
// name. Only drivers whose "init" reports the attach capability are
// attached by the controller; the others are the kubelet's business.
type Flex struct {
	driver     string
	dir        string
	attachable bool

	mu          sync.Mutex
	unsupported map[string]bool
}

// NewFlex runs the driver's "init" in pluginDir/dirName and returns the
// plugin.
func NewFlex(logger klog.Logger, pluginDir, dirName string) (*Flex, error) {
	p := &Flex{
		driver:      utilstrings.UnescapeQualifiedName(dirName),
		dir:         filepath.Join(pluginDir, dirName),
		unsupported: map[string]bool{},
	}
	st, err := p.call(context.Background(), logger, flexInit)
	if err != nil {
		return nil, err
	}
	p.attachable = st.Capabilities.Attach
	return p, nil
}

// executable is <dir>/<last part of the driver name>.
func (p *Flex) executable() string {
	parts := strings.Split(p.driver, "/")
	return filepath.Join(p.dir, parts[len(parts)-1])
}

// call runs one driver command. A command the driver once said it does not
// support is not run again.
func (p *Flex) call(ctx context.Context, logger klog.Logger, command string, args ...string) (*flexStatus, error) {
	p.mu.Lock()
	skip := p.unsupported[command]
	p.mu.Unlock()
	if skip {
		return nil, errFlexNotSupported
	}
	path := p.executable()
	argv := append([]string{command}, args...)
	out, execErr := exec.CommandContext(ctx, path, argv...).CombinedOutput()
	st, err := parseFlexReply(logger, command, out)
	if execErr != nil && err == nil {
		logger.Error(execErr, "FlexVolume: driver bug: exec error but no error in response", "executable", path)
		return nil, execErr
	}
	if isFlexNotSupported(err) {
		p.mu.Lock()
		p.unsupported[command] = true
		p.mu.Unlock()
	} else if execErr != nil {
		logger.Info("FlexVolume: driver call failed", "executable", path, "args", argv, "err", execErr, "output", string(out))
	}
	return st, err
}

// options is the JSON document describing the volume to the driver.
func flexOptions(spec *Spec) (string, error) {
	var fsType string
	var readOnly bool
	var extra map[string]string
	switch {
	case spec.Volume != nil && spec.Volume.FlexVolume != nil:
		src := spec.Volume.FlexVolume
		fsType, readOnly, extra = src.FSType, src.ReadOnly, src.Options
	case spec.PersistentVolume != nil && spec.PersistentVolume.Spec.FlexVolume != nil:
		src := spec.PersistentVolume.Spec.FlexVolume
		// A PV's read-only flag is the claim reference's.
		fsType, readOnly, extra = src.FSType, spec.ReadOnly, src.Options
	default:
		return "", errors.New("not a flex volume")
	}
	opts := map[string]string{flexOptionFSType: fsType, flexOptionReadWrite: "rw", flexOptionPVorVolumeName: spec.Name()}
	if readOnly {
		opts[flexOptionReadWrite] = "ro"
	}
	for k, v := range extra {
		opts[k] = v
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return "", fmt.Errorf("failed to marshal spec, error: %s", err.Error())
	}
	return string(b), nil
}

// specArgs is the options document as an argument list; a spec that cannot
// be described is passed as nothing, as upstream does.
func specArgs(spec *Spec) []string {
	o, err := flexOptions(spec)
	if err != nil {
		return nil
	}
	return []string{o}
}

func flexDriver(spec *Spec) string {
	switch {
	case spec == nil:
	case spec.Volume != nil && spec.Volume.FlexVolume != nil:
		return spec.Volume.FlexVolume.Driver
	case spec.PersistentVolume != nil && spec.PersistentVolume.Spec.FlexVolume != nil:
		return spec.PersistentVolume.Spec.FlexVolume.Driver
	}
	return ""
}

func (p *Flex) Name() string { return p.driver }

func (p *Flex) CanSupport(spec *Spec) bool {
	d := flexDriver(spec)
	return d != "" && d == p.driver
}

// VolumeName is the PV or pod volume name. The driver is still asked
// ("getvolumename") until it says it does not support it, but its answer is
// not used, as upstream.
func (p *Flex) VolumeName(spec *Spec) (string, error) {
	logger := klog.TODO()
	_, err := p.call(context.Background(), logger, flexGetVolumeName, specArgs(spec)...)
	if err != nil && !isFlexNotSupported(err) {
		return "", err
	}
	return spec.Name(), nil
}

func (p *Flex) CanAttach(*Spec) (bool, error) { return p.attachable, nil }

// Attach runs "attach <options> <node>" and returns the device the driver
// reports. A driver without attach attaches nothing.
func (p *Flex) Attach(ctx context.Context, spec *Spec, node types.NodeName) (string, error) {
	logger := klog.FromContext(ctx)
	st, err := p.call(ctx, logger, flexAttach, append(specArgs(spec), string(node))...)
	if isFlexNotSupported(err) {
		logger.Info("flexVolume driver "+p.driver+": using default Attach", "volume", spec.Name(), "node", node)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return st.DevicePath, nil
}

// Detach runs "detach <volume name> <node>".
func (p *Flex) Detach(ctx context.Context, volumeName string, node types.NodeName) error {
	logger := klog.FromContext(ctx)
	_, err := p.call(ctx, logger, flexDetach, volumeName, string(node))
	if isFlexNotSupported(err) {
		logger.Info("flexVolume driver "+p.driver+": using default Detach", "volume", volumeName, "node", node)
		return nil
	}
	return err
}

// VolumesAreAttached runs "isattached <options> <node>" per volume. A
// driver without isattached leaves every volume as it is (nil result).
func (p *Flex) VolumesAreAttached(ctx context.Context, specs []*Spec, node types.NodeName) (map[*Spec]bool, error) {
	logger := klog.FromContext(ctx)
	attached := make(map[*Spec]bool, len(specs))
	for _, spec := range specs {
		attached[spec] = true
		st, err := p.call(ctx, logger, flexIsAttached, append(specArgs(spec), string(node))...)
		if isFlexNotSupported(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !st.Attached {
			attached[spec] = false
			logger.V(2).Info("VolumesAreAttached: check volume is no longer attached", "volume", spec.Name())
		}
	}
	return attached, nil
}
