package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// minCacheSize is the smallest --cache-size: below it a few large answers
// would fill the cache.
const minCacheSize = 1 << 20

// byteSize is a flag of bytes, as an integer or a Kubernetes quantity
// ("32Mi", "64M").
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteSize) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("%q: want bytes, e.g. 33554432 or 32Mi", v)
	}
	*b = byteSize(q.Value())
	return nil
}

// checkCache checks --cache-size, whose total the configuration splits
// into its two bounds.
func (f *serveFlags) checkCache() error {
	if f.cacheSize < minCacheSize {
		return fmt.Errorf("--cache-size %d: at least %d bytes (1Mi); it is a size in bytes (an entry count before), e.g. 32Mi", f.cacheSize, minCacheSize)
	}
	return nil
}
