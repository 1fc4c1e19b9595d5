module gateway/tests/login_flood

go 1.26.0
