package apierror_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolaudit/toolaudit/httpapi/apierror"
)

// TestWrite: the envelope is one line of JSON that decodes to the code
// and message given (quotes, control characters and invalid UTF-8
// escaped); it is not cached; only a 503 carries Retry-After.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		status     int
		msg        string
		retryAfter string
	}{
		{http.StatusServiceUnavailable, "down; retry", "1"},
		{http.StatusBadRequest, "bad \"member\"\n\x01\xff", ""},
	} {
		rec := httptest.NewRecorder()
		apierror.Write(rec, tc.status, "some_code", tc.msg)
		var got struct{ Error, Message string }
		body := rec.Body.Bytes()
		if err := json.Unmarshal(body, &got); err != nil || body[len(body)-1] != '\n' || got.Error != "some_code" {
			t.Fatalf("%d: %q: %+v %v", tc.status, body, got, err)
		}
		if tc.msg == "down; retry" && got.Message != tc.msg {
			t.Errorf("message %q", got.Message)
		}
		h := rec.Result().Header
		if rec.Code != tc.status || h.Get("Retry-After") != tc.retryAfter || h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%d: status %d, headers %v", tc.status, rec.Code, h)
		}
	}
}
