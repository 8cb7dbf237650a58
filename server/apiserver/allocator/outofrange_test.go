package allocator

import "testing"

// An ErrOutOfRange for a requested cluster IP names IPs and the CIDR,
// whatever the client wrote. It currently fails for a malformed address:
// kindOf guesses the kind from the value's text, so "not-an-ip" reads
// "The range of valid ports is 10.43.0.0/24". (Validation rejects such a
// clusterIP before allocation, so the API does not show it.)
func TestOutOfRangeMessageOfMalformedIP(t *testing.T) {
	s, err := NewServices(t.Context(), nil, "10.43.0.0/24", "30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"not-an-ip", "10"} {
		_, _, err := s.AllocateIP(t.Context(), ip, "ns/a")
		if want := "provided " + ip + " is not in the valid range. The range of valid IPs is 10.43.0.0/24"; err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %q", ip, err, want)
		}
	}
}
