package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// RecyclerConfig holds the --pv-recycler-* settings of the hostPath and NFS
// recycler pods. A template path of "" means the built-in scrubber pod.
type RecyclerConfig struct {
	PodTemplateFilePathHostPath string
	MinimumTimeoutHostPath      int
	IncrementTimeoutHostPath    int
	PodTemplateFilePathNFS      string
	MinimumTimeoutNFS           int
	IncrementTimeoutNFS         int
}

// recyclerPodConfig is one plugin's recycler pod template and timeouts.
type recyclerPodConfig struct {
	template         *v1.Pod
	minimumTimeout   int
	timeoutIncrement int
}

// podFor returns a fresh recycler pod for pv, its deadline scaled with the
// volume size. The caller fills in the volume source.
func (c recyclerPodConfig) podFor(pv *v1.PersistentVolume) *v1.Pod {
	pod := c.template.DeepCopy()
	pod.Spec.ActiveDeadlineSeconds = ptr.To(recyclerTimeout(c.minimumTimeout, c.timeoutIncrement, pv))
	return pod
}

// recyclerTimeout gives timeoutIncrement seconds per whole GiB of the
// volume, but never less than minimumTimeout.
func recyclerTimeout(minimumTimeout, timeoutIncrement int, pv *v1.PersistentVolume) int64 {
	size := pv.Spec.Capacity[v1.ResourceStorage]
	gi := resource.MustParse("1Gi")
	timeout := (size.Value() / gi.Value()) * int64(timeoutIncrement)
	if timeout < int64(minimumTimeout) {
		return int64(minimumTimeout)
	}
	return timeout
}

// defaultRecyclerPod is upstream's built-in scrubber: it empties the
// volume mounted at /scrub and fails if anything is left.
func defaultRecyclerPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "pv-recycler-",
			Namespace:    metav1.NamespaceDefault,
		},
		Spec: v1.PodSpec{
			ActiveDeadlineSeconds: ptr.To[int64](60),
			RestartPolicy:         v1.RestartPolicyNever,
			Volumes:               []v1.Volume{{Name: "vol"}},
			Containers: []v1.Container{{
				Name:         "pv-recycler",
				Image:        "registry.k8s.io/build-image/debian-base:bookworm-v1.0.6",
				Command:      []string{"/bin/sh"},
				Args:         []string{"-c", "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1"},
				VolumeMounts: []v1.VolumeMount{{Name: "vol", MountPath: "/scrub"}},
			}},
		},
	}
}

// loadRecyclerPodTemplate reads a pod (YAML or JSON, with apiVersion and
// kind) from path, or returns the built-in pod when path is "".
func loadRecyclerPodTemplate(path string) (*v1.Pod, error) {
	if path == "" {
		return defaultRecyclerPod(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read file path %s: %+v", path, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("file was empty: %s", path)
	}
	pod := &v1.Pod{}
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(v1.SchemeGroupVersion), data, pod); err != nil {
		return nil, fmt.Errorf("failed decoding file: %v", err)
	}
	// The recycler replaces the first volume's source; there must be one.
	if len(pod.Spec.Volumes) < 1 {
		return nil, fmt.Errorf("pod specification (%v): does not contain any volume(s)", path)
	}
	return pod, nil
}

// recycleWithPod runs the recycler pod for a volume and waits for it to
// finish, forwarding the pod's events through record. The pod is named
// after the PV so that a second controller (or a forged pod) is noticed as
// "already exists"; such a pod is deleted and the recycle retried later.
// The pod is always deleted before returning.
func recycleWithPod(ctx context.Context, client clientset.Interface, pvName string, pod *v1.Pod, record recordFunc) error {
	logger := klog.FromContext(ctx)
	pod.Name = "recycler-for-" + pvName
	pod.GenerateName = ""
	pods := client.CoreV1().Pods(pod.Namespace)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	ch, err := watchRecyclerPod(watchCtx, client, pod.Namespace, pod.Name)
	if err != nil {
		logger.V(4).Info("Cannot watch recycler pod", "pod", klog.KObj(pod), "err", err)
		return err
	}

	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			if delErr := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); delErr != nil {
				return fmt.Errorf("failed to delete old recycler pod %s/%s: %s", pod.Namespace, pod.Name, delErr)
			}
			return fmt.Errorf("old recycler pod found, will retry later")
		}
		return fmt.Errorf("unexpected error creating recycler pod:  %+v", err)
	}

	waitErr := waitForRecyclerPod(ctx, pod.Name, ch, record)

	// Delete the pod whatever happened; a failed delete is retried with the
	// next recycle attempt.
	logger.V(2).Info("Deleting recycler pod", "pod", klog.KObj(pod))
	delErr := pods.Delete(context.WithoutCancel(ctx), pod.Name, metav1.DeleteOptions{})
	if delErr != nil {
		logger.Error(delErr, "Failed to delete recycler pod", "pod", klog.KObj(pod))
	}
	if waitErr != nil {
		return fmt.Errorf("failed to recycle volume: %s", waitErr)
	}
	if delErr != nil {
		return fmt.Errorf("failed to delete recycler pod: %s", delErr)
	}
	return nil
}

// waitForRecyclerPod returns when the pod succeeded (nil) or failed, was
// deleted or could no longer be watched (an error).
func waitForRecyclerPod(ctx context.Context, podName string, ch <-chan watch.Event, record recordFunc) error {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok = <-ch:
		}
		if !ok {
			return fmt.Errorf("recycler pod %q watch channel had been closed", podName)
		}
		switch obj := ev.Object.(type) {
		case *v1.Pod:
			switch ev.Type {
			case watch.Added, watch.Modified:
				switch obj.Status.Phase {
				case v1.PodSucceeded:
					return nil
				case v1.PodFailed:
					if obj.Status.Message != "" {
						return errors.New(obj.Status.Message)
					}
					return fmt.Errorf("pod failed, pod.Status.Message unknown")
				}
			case watch.Deleted:
				return fmt.Errorf("recycler pod was deleted")
			case watch.Error:
				return fmt.Errorf("recycler pod watcher failed")
			}
		case *v1.Event:
			// Pass the pod's events on to the PV, so users see why a
			// recycler hangs (image pulls, scheduling...).
			if ev.Type == watch.Added {
				record(obj.Type, obj.Message)
			}
		}
	}
}

// watchRecyclerPod merges a watch of the pod and one of its events into
// one channel, closed when either watch ends or ctx is done.
func watchRecyclerPod(ctx context.Context, client clientset.Interface, namespace, name string) (<-chan watch.Event, error) {
	podWatch, err := client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return nil, err
	}
	eventWatch, err := client.CoreV1().Events(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
	})
	if err != nil {
		podWatch.Stop()
		return nil, err
	}

	out := make(chan watch.Event, 30)
	var wg sync.WaitGroup
	forward := func(w watch.Interface) {
		defer wg.Done()
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}
	wg.Add(2)
	go forward(podWatch)
	go forward(eventWatch)
	go func() {
		wg.Wait()
		close(out)
	}()
	return out, nil
}
