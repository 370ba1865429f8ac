package affinity

import (
	"reflect"
	"testing"
)

func TestParseList(t *testing.T) {
	good := map[string][]int{
		"1":       {1},
		"1,3":     {1, 3},
		"0-3,6":   {0, 1, 2, 3, 6},
		"2,1-3,2": {2, 1, 3},
		"1023":    {1023},
	}
	for in, want := range good {
		got, err := ParseList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1,", "-1", "3-1", "1024", "0-1024", "1-", " 1"} {
		if got, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %v, want an error", in, got)
		}
	}
}
