package pgstore

const PublishLock = publishLock
