package main

import (
	_ "github.com/bsm/redislock"
	_ "github.com/go-redsync/redsync/v4"
	_ "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	_ "github.com/lockactor/lockactor"
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/goleak"
)

func main() {}
