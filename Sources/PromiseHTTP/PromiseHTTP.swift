// PromiseHTTP: see HTTPClient.swift
