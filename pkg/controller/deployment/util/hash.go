package util

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// ComputeHash returns the pod-template-hash for a template. It must match
// upstream bit for bit: ReplicaSets made by either controller share names, so
// one controller can take over the other's rollout without churn.
func ComputeHash(template *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	// dump.ForHash is the spew configuration upstream hashes with (sorted keys,
	// no methods, no pointer addresses); any other printer changes the name.
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		// Upstream writes an 8-byte buffer holding a little-endian uint32.
		buf := make([]byte, 8)
		binary.LittleEndian.PutUint32(buf, uint32(*collisionCount))
		h.Write(buf)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
