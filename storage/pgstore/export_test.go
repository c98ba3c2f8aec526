package pgstore

const PublishLock = publishLock

var Migrations = migrations
