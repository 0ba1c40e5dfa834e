package format

// Date: RFC 3339 §5.6 full-date, YYYY-MM-DD with the day within its month
// (February 29 in leap years of the Gregorian rule only).
func Date(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	y, ok1 := digits(s[0:4])
	m, ok2 := digits(s[5:7])
	d, ok3 := digits(s[8:10])
	return ok1 && ok2 && ok3 && 1 <= m && m <= 12 && 1 <= d && d <= daysIn(m, y)
}

// Time: RFC 3339 §5.6 full-time, hh:mm:ss with an optional fraction and
// a required offset (Z, z or ±hh:mm, hours 00-23). Second 60, a leap
// second, is valid only at 23:59 UTC once the offset is applied (§5.7);
// which days had one is not checked.
func Time(s string) bool {
	if len(s) < 9 || s[2] != ':' || s[5] != ':' {
		return false
	}
	h, ok1 := digits(s[0:2])
	m, ok2 := digits(s[3:5])
	sec, ok3 := digits(s[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 60 {
		return false
	}
	i := 8
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	if i >= len(s) {
		return false
	}
	utc := h*60 + m
	switch off := s[i:]; off[0] {
	case 'Z', 'z':
		if len(off) != 1 {
			return false
		}
	case '+', '-':
		if len(off) != 6 || off[3] != ':' {
			return false
		}
		oh, ok1 := digits(off[1:3])
		om, ok2 := digits(off[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return false
		}
		if off[0] == '+' {
			utc -= oh*60 + om
		} else {
			utc += oh*60 + om
		}
		utc = (utc + 24*60) % (24 * 60)
	default:
		return false
	}
	return sec < 60 || utc == 23*60+59
}

// DateTime: RFC 3339 §5.6 date-time, a Date, "T" or "t", and a Time.
func DateTime(s string) bool {
	return len(s) > 11 && (s[10] == 'T' || s[10] == 't') && Date(s[:10]) && Time(s[11:])
}

// digits is the value of s, all ASCII digits.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
