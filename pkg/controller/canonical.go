package controller

import (
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
	"weak"
)

// wireMarshaler is a generated API type's pointer: it encodes itself.
type wireMarshaler[T any] interface {
	*T
	Marshal() ([]byte, error)
}

// sliceCanon hands out one shared copy of equal slices, so the pods of one
// template hold their containers, tolerations and owner references once.
// It keeps its copies weakly: a copy no cached object uses any more is
// collected and forgotten.
type sliceCanon[T any, PT wireMarshaler[T]] struct {
	mu    sync.Mutex
	byKey map[string]weakSlice[T]
}

type weakSlice[T any] struct {
	first weak.Pointer[T]
	n     int
}

// canonical returns a slice equal to s (reflect.DeepEqual) that other
// callers may also have been given, or s itself when it is the first of
// its content; prepare is then applied to each element first (only a copy
// kept is worth interning). Equality is checked, not assumed from the
// encoding: the wire format doesn't tell nil from empty.
func (c *sliceCanon[T, PT]) canonical(s []T, prepare func(*T)) []T {
	if len(s) == 0 {
		return s
	}
	key, ok := encodeKey[T, PT](s)
	if !ok {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, found := c.byKey[key]; found && w.n == len(s) {
		if first := w.first.Value(); first != nil {
			if shared := unsafe.Slice(first, w.n); reflect.DeepEqual(shared, s) {
				return shared
			}
			prepareAll(s, prepare)
			return s
		}
	}
	prepareAll(s, prepare)
	if c.byKey == nil {
		c.byKey = map[string]weakSlice[T]{}
	}
	c.byKey[key] = weakSlice[T]{first: weak.Make(&s[0]), n: len(s)}
	runtime.AddCleanup(&s[0], c.forget, key)
	return s
}

func prepareAll[T any](s []T, prepare func(*T)) {
	for i := range s {
		prepare(&s[i])
	}
}

// forget drops key once its copy has been collected (unless a live copy
// has taken its place since).
func (c *sliceCanon[T, PT]) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, found := c.byKey[key]; found && w.first.Value() == nil {
		delete(c.byKey, key)
	}
}

// size is how many distinct copies c holds.
func (c *sliceCanon[T, PT]) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// encodeKey is the elements' wire encodings, each after its length.
func encodeKey[T any, PT wireMarshaler[T]](s []T) (string, bool) {
	var b strings.Builder
	for i := range s {
		raw, err := PT(&s[i]).Marshal()
		if err != nil {
			return "", false
		}
		b.WriteString(strconv.Itoa(len(raw)))
		b.WriteByte(':')
		b.Write(raw)
	}
	return b.String(), true
}
