package sim

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// nameSampler checks every 100 ms that no branch runs more than one instance
// (by its catalog id, as sampler does) and that no branch name runs more than
// one postmaster, on one node or on two: a name made again under a new id (a
// lost branch recreated elsewhere) must not run beside its old instance. A
// postmaster's name comes from the catalog row of its id, remembered once read,
// since a recreated name's old row is deleted; while the catalog does not answer
// (M9), ids never read are counted, not named.
type nameSampler struct {
	c       *cluster
	stopc   chan struct{}
	done    chan struct{}
	names   map[int64]string
	mu      sync.Mutex
	samples int
	unnamed int // samples with a postmaster whose id the catalog could not name
	bad     []string
}

func startNameSampler(c *cluster) *nameSampler {
	s := &nameSampler{c: c, stopc: make(chan struct{}), done: make(chan struct{}), names: map[int64]string{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// sample takes one look at every postmaster.
func (s *nameSampler) sample() {
	in, err := instances(s.c.dir)
	var bad []string
	if err != nil {
		bad = append(bad, err.Error())
	}
	now := time.Now().Format("15:04:05.000")
	for _, d := range duplicates(in) {
		bad = append(bad, now+" "+d)
	}
	unnamed := false
	byName := map[string][]instance{}
	for _, i := range in {
		name, ok := s.name(i.branch)
		if !ok {
			unnamed = true
			continue
		}
		byName[name] = append(byName[name], i)
	}
	for name, is := range byName {
		if len(is) > 1 {
			bad = append(bad, fmt.Sprintf("%s name %s runs %d postmasters: %v", now, name, len(is), is))
		}
	}
	sort.Strings(bad)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if unnamed {
		s.unnamed++
	}
	s.bad = append(s.bad, bad...)
}

// name is the branch name of catalog id, reading the catalog's rows for an id
// it has not seen.
func (s *nameSampler) name(id int64) (string, bool) {
	if n, ok := s.names[id]; ok {
		return n, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rows, err := s.c.cat.db.QueryContext(ctx, "SELECT id, name FROM branches WHERE source = 'app'")
	if err != nil {
		return "", false
	}
	defer rows.Close()
	for rows.Next() {
		var (
			i int64
			n string
		)
		if rows.Scan(&i, &n) == nil {
			s.names[i] = n
		}
	}
	n, ok := s.names[id]
	return n, ok
}

// stop ends the sampling and returns the number of samples, how many had a
// postmaster it could not name, and the violations.
func (s *nameSampler) stop() (samples, unnamed int, bad []string) {
	close(s.stopc)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.unnamed, s.bad
}
