package proxy

import "testing"

// Every SQLSTATE refusals are counted by has a counter of its own, and any other
// code shares the last one.
func TestRefusedCounts(t *testing.T) {
	if n := len(RefusedCodes()); n != numRefusedCodes {
		t.Fatalf("%d RefusedCodes, numRefusedCodes = %d", n, numRefusedCodes)
	}
	var s Stats
	for _, code := range RefusedCodes() {
		s.countRefused(code)
	}
	s.countRefused("42P01")
	s.countRefused("")
	by := s.RefusedBy()
	for _, code := range RefusedCodes() {
		if by[code] != 1 {
			t.Errorf("%s counted %d times, want 1", code, by[code])
		}
	}
	if by[RefusedOther] != 2 || len(by) != numRefusedCodes+1 {
		t.Errorf("other = %d, want 2; %d labels, want %d", by[RefusedOther], len(by), numRefusedCodes+1)
	}
	if s.Refused.Load() != numRefusedCodes+2 {
		t.Errorf("Refused = %d", s.Refused.Load())
	}
}
