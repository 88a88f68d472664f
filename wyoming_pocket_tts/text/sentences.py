class SentenceSplitter: pass
