package attachdetach

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
)

// TestAttachAndDetach: a pod scheduled to a managed node gets its CSI
// volume attached through a VolumeAttachment and listed in node status;
// after the pod is gone the volume stays while the node has it in use and
// is detached once the node stops using it.
func TestAttachAndDetach(t *testing.T) {
	e := newEnv(t, "ad-lifecycle")
	e.startController(testTimers, false)
	node := e.name("node")
	e.createNode(node, true)
	driver := e.name("driver.example.com") // no CSIDriver object: attach
	vol := e.createBoundVolume("claim", driver, v1.ReadWriteOnce)
	pod := e.createPod("pod", node, "claim")

	va := e.waitForAttachment(vol, node)
	if va.Spec.Attacher != driver || va.Spec.NodeName != node ||
		va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != vol.pv || va.Spec.Source.InlineVolumeSpec != nil {
		t.Fatalf("unexpected VolumeAttachment spec %+v", va.Spec)
	}
	// Not reported attached until the attacher says so.
	e.consistently(time.Second, "volume not yet reported attached", func(ctx context.Context) (bool, error) {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && len(n.Status.VolumesAttached) == 0, err
	})
	e.markAttached(va)
	e.waitForVolumesAttached(node, vol.uniqueName())
	e.waitForEvent(pod, v1.EventTypeNormal, "SuccessfulAttachVolume", fmt.Sprintf("AttachVolume.Attach succeeded for volume %q ", vol.pv))

	e.setVolumesInUse(node, vol.uniqueName())
	e.deletePod(pod.Name)
	e.consistently(3*time.Second, "in-use volume stays attached", func(ctx context.Context) (bool, error) {
		_, err := e.c.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		return err == nil, err
	})
	e.waitForVolumesAttached(node, vol.uniqueName())

	e.setVolumesInUse(node)
	e.waitForAttachmentGone(va.Name)
	e.waitForVolumesAttached(node)
}

// TestNotAttached: no VolumeAttachment for a driver with attachRequired:
// false, nor on a node without the controller-managed annotation, while a
// volume beside them is attached.
func TestNotAttached(t *testing.T) {
	e := newEnv(t, "ad-notattached")
	e.startController(testTimers, false)
	node, unmanaged := e.name("node"), e.name("unmanaged")
	e.createNode(node, true)
	e.createNode(unmanaged, false)
	noAttach, attach := e.name("noattach.example.com"), e.name("attach.example.com")
	e.createCSIDriver(noAttach, false)
	e.createCSIDriver(attach, true)
	skipped := e.createBoundVolume("skipped", noAttach, v1.ReadWriteOnce)
	attached := e.createBoundVolume("attached", attach, v1.ReadWriteOnce)
	elsewhere := e.createBoundVolume("elsewhere", attach, v1.ReadWriteOnce)
	e.createPod("unmanaged-pod", unmanaged, "elsewhere")
	e.createPod("pod", node, "skipped", "attached")

	e.markAttached(e.waitForAttachment(attached, node))
	e.waitForVolumesAttached(node, attached.uniqueName())
	e.consistently(2*time.Second, "no VolumeAttachment for the other volumes", func(ctx context.Context) (bool, error) {
		for _, name := range []string{attachmentName(skipped, node), attachmentName(elsewhere, unmanaged)} {
			if _, err := e.c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("VolumeAttachment %s: want NotFound, got %v", name, err)
			}
		}
		return true, nil
	})
	n, err := e.c.CoreV1().Nodes().Get(e.ctx, unmanaged, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.VolumesAttached) != 0 {
		t.Errorf("unmanaged node status lists %v", n.Status.VolumesAttached)
	}
}

// TestMultiAttach: a ReadWriteOnce volume attached to one node is not
// attached to a second one; the second node's pod is told who holds it,
// and gets the volume once the first pod is gone.
func TestMultiAttach(t *testing.T) {
	e := newEnv(t, "ad-multiattach")
	e.startController(testTimers, false)
	nodeA, nodeB := e.name("a"), e.name("b")
	e.createNode(nodeA, true)
	e.createNode(nodeB, true)
	vol := e.createBoundVolume("claim", e.name("driver.example.com"), v1.ReadWriteOnce)
	first := e.createPod("first", nodeA, "claim")
	vaA := e.markAttached(e.waitForAttachment(vol, nodeA))
	e.waitForVolumesAttached(nodeA, vol.uniqueName())

	second := e.createPod("second", nodeB, "claim")
	e.waitForEvent(second, v1.EventTypeWarning, "FailedAttachVolume",
		fmt.Sprintf("Waiting for detach for volume %q Volume is already used by pod(s) %s", vol.pv, first.Name))
	if _, err := e.c.StorageV1().VolumeAttachments().Get(e.ctx, attachmentName(vol, nodeB), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second attachment: want NotFound, got %v", err)
	}

	e.deletePod(first.Name)
	e.waitForAttachmentGone(vaA.Name)
	e.markAttached(e.waitForAttachment(vol, nodeB))
	e.waitForVolumesAttached(nodeB, vol.uniqueName())
	e.waitForVolumesAttached(nodeA)
}

// TestRestart: a restarted controller (or one replacing upstream's) keeps
// attachments still in use untouched, adopts a VolumeAttachment no node
// status listed yet, and detaches a volume whose pod went away while it
// was down.
func TestRestart(t *testing.T) {
	e := newEnv(t, "ad-restart")
	stop := e.startController(testTimers, false)
	node := e.name("node")
	e.createNode(node, true)
	driver := e.name("driver.example.com")
	kept := e.createBoundVolume("kept", driver, v1.ReadWriteOnce)
	gone := e.createBoundVolume("gone", driver, v1.ReadWriteOnce)
	adopted := e.createBoundVolume("adopted", driver, v1.ReadWriteOnce)
	e.createPod("kept", node, "kept")
	gonePod := e.createPod("gone", node, "gone")
	keptVA := e.markAttached(e.waitForAttachment(kept, node))
	goneVA := e.markAttached(e.waitForAttachment(gone, node))
	e.waitForVolumesAttached(node, kept.uniqueName(), gone.uniqueName())
	e.setVolumesInUse(node, kept.uniqueName(), gone.uniqueName())
	stop()

	// While the controller is down: one pod finishes and its volume is
	// unmounted; another pod's volume is attached but not yet reported.
	e.deletePod(gonePod.Name)
	e.setVolumesInUse(node, kept.uniqueName())
	e.createPod("adopted", node, "adopted")
	adoptedVA := e.markAttached(e.createAttachment(adopted, node))

	e.startController(testTimers, false)
	e.waitForAttachmentGone(goneVA.Name)
	e.waitForVolumesAttached(node, kept.uniqueName(), adopted.uniqueName())
	e.consistently(3*time.Second, "attachments in use untouched", func(ctx context.Context) (bool, error) {
		for _, want := range []string{keptVA.Name, adoptedVA.Name} {
			va, err := e.c.StorageV1().VolumeAttachments().Get(ctx, want, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			orig := keptVA
			if want == adoptedVA.Name {
				orig = adoptedVA
			}
			if va.UID != orig.UID || va.ResourceVersion != orig.ResourceVersion {
				return false, fmt.Errorf("VolumeAttachment %s changed: %+v", want, va)
			}
		}
		return true, nil
	})
}

// TestOutOfServiceForceDetach: a node tainted out-of-service loses volumes
// no pod needs even while it reports them in use, and the forced detach
// is counted.
func TestOutOfServiceForceDetach(t *testing.T) {
	e := newEnv(t, "ad-outofservice")
	e.startController(testTimers, false)
	node := e.name("node")
	e.createNode(node, true)
	vol := e.createBoundVolume("claim", e.name("driver.example.com"), v1.ReadWriteOnce)
	pod := e.createPod("pod", node, "claim")
	va := e.markAttached(e.waitForAttachment(vol, node))
	e.waitForVolumesAttached(node, vol.uniqueName())
	e.setVolumesInUse(node, vol.uniqueName())
	before := forcedDetaches(t, "out-of-service")

	e.deletePod(pod.Name)
	e.consistently(2*time.Second, "in-use volume stays attached", func(ctx context.Context) (bool, error) {
		_, err := e.c.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		return err == nil, err
	})
	n, err := e.c.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute})
	if _, err := e.c.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForAttachmentGone(va.Name)
	e.waitForVolumesAttached(node)
	if after := forcedDetaches(t, "out-of-service"); after != before+1 {
		t.Errorf("forced detaches (out-of-service): %v -> %v, want one more", before, after)
	}
}

// TestForceDetachOnTimeout: a volume still reported in use on a NotReady
// node is detached once maxWaitForUnmountDuration passes, unless forced
// detach on timeout is disabled.
func TestForceDetachOnTimeout(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			e := newEnv(t, "ad-timeout")
			timers := testTimers
			timers.ReconcilerMaxWaitForUnmountDuration = 2 * time.Second
			e.startController(timers, disabled)
			node := e.name("node")
			e.createNode(node, true)
			vol := e.createBoundVolume("claim", e.name("driver.example.com"), v1.ReadWriteOnce)
			pod := e.createPod("pod", node, "claim")
			va := e.markAttached(e.waitForAttachment(vol, node))
			e.waitForVolumesAttached(node, vol.uniqueName())
			e.setVolumesInUse(node, vol.uniqueName())
			n, err := e.c.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Conditions[0].Status = v1.ConditionUnknown
			if _, err := e.c.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := forcedDetaches(t, "timeout")
			e.deletePod(pod.Name)
			if disabled {
				e.consistently(5*time.Second, "volume stays attached", func(ctx context.Context) (bool, error) {
					_, err := e.c.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
					return err == nil, err
				})
				return
			}
			e.waitForAttachmentGone(va.Name)
			if after := forcedDetaches(t, "timeout"); after != before+1 {
				t.Errorf("forced detaches (timeout): %v -> %v, want one more", before, after)
			}
		})
	}
}

// forcedDetaches reads upstream's forced detach counter for reason from
// the process's legacy registry (the controller runs in-process).
func forcedDetaches(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "attach_detach_controller_attachdetach_controller_forced_detaches" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
