package controller

import "sync"

// SlowStartInitialBatchSize is the first batch of SlowStartBatch as used by
// the replica controllers: one call, then 2, 4, 8, ... With quota exhausted
// only one doomed create (and one event) is issued per sync.
const SlowStartInitialBatchSize = 1

// SlowStartBatch calls fn count times in concurrent batches of
// initialBatchSize, 2*initialBatchSize, 4*... . After a batch with any
// failure it stops, so the remaining calls are never made. It returns how
// many calls succeeded and one of the errors.
func SlowStartBatch(count int, initialBatchSize int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, initialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for i := 0; i < batch; i++ {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		successes += batch - len(errs)
		if len(errs) > 0 {
			return successes, <-errs
		}
		remaining -= batch
	}
	return successes, nil
}
