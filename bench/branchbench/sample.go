package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// startSampler records, every interval and once when stopped, how many branch
// servers run, how many bytes the branches own and how much disk the state
// directory takes (seeds excluded). It returns the function that stops it.
func startSampler(ctx context.Context, p *proxy, r *result, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sample := func() {
		list, err := p.branches(ctx)
		if err != nil {
			return
		}
		running, owned := 0, int64(0)
		for _, b := range list {
			owned += b.OwnedBytes
			if b.State == "running" {
				running++
			}
		}
		disk := diskUsed(p.state)
		r.mu.Lock()
		r.PeakRun = max(r.PeakRun, running)
		r.PeakOwned = max(r.PeakOwned, owned)
		r.PeakDisk = max(r.PeakDisk, disk)
		r.mu.Unlock()
	}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		ctx = context.Background()
		sample()
	}
}

// diskUsed is the space allocated under state on its own filesystem (mounted branch
// data directories are not entered), each inode counted once, without the seeds.
func diskUsed(state string) int64 {
	var rootDev uint64
	if st, err := os.Stat(state); err == nil {
		rootDev = st.Sys().(*syscall.Stat_t).Dev
	}
	seen := map[uint64]bool{}
	var total int64
	filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && path == filepath.Join(state, "seeds") {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Dev != rootDev {
			return filepath.SkipDir
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}

// removeAll destroys every branch of the proxy, concurrency at a time, so that the
// next workflow starts from the seed alone.
func removeAll(ctx context.Context, p *proxy, concurrency int) error {
	list, err := p.branches(ctx)
	if err != nil {
		return err
	}
	todo := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range concurrency {
		wg.Go(func() {
			for name := range todo {
				if err := p.destroy(ctx, name); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, b := range list {
		todo <- b.Name
	}
	close(todo)
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
