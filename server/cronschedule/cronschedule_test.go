package cronschedule

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s, err := Parse("TZ=Asia/Tokyo 0 9 * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if got, want := s.Next(from), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(24*time.Hour); !got.Equal(want) {
		t.Errorf("next 09:00 Tokyo after %v: %v, want %v", from, got, want)
	}
	for _, bad := range []string{"TZ=UTC", "CRON_TZ=Asia/Tokyo", "", "61 * * * *"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
