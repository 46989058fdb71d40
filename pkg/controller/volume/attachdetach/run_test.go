package attachdetach

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// TestRun runs the whole controller over running fake informers: the pod's
// volume gets a VolumeAttachment, and Run returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	pvc, pv := boundCSI("ns", "c", "h1")
	client := fake.NewClientset(node("n", true), pvc, pv, claimPod("ns", "p", "n", "c"))
	factory := informers.NewSharedInformerFactory(client, 0)
	adc, err := NewController(ctx, client,
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes(),
		factory.Storage().V1().CSINodes(), factory.Storage().V1().CSIDrivers(), factory.Storage().V1().VolumeAttachments(),
		"",
		false, time.Minute, false, DefaultTimerConfig)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		adc.Run(ctx)
	}()
	name := plugins.AttachmentName("h1", "d", "n")
	testutil.WaitUntil(t, fmt.Sprintf("VolumeAttachment %s gone", name), func(ctx context.Context) (bool, error) {
		_, err := client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	if _, ok := factory.Core().V1().Pods().Informer().GetIndexer().GetIndexers()["pod-pvc-index"]; !ok {
		t.Error("pod informer lacks the pod-pvc-index")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	factory.Shutdown()
}
