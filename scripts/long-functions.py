#!/usr/bin/env python3
"""Functions longer than 100 lines in Rust sources, outside tests.

Usage: scripts/long-functions.py SRC_DIR... Counts a function from its `fn` line to its
closing brace (doc comments not included); inline `#[cfg(test)]` modules and the
tests/, benches/ and examples/ folders are left out. Prints `LINES FILE LINE SIGNATURE`
for each one over the limit, longest first, and exits 1 if there is any.
"""
import re,sys,os
def strip_tests(src):
    m=re.search(r'\n#\[cfg\(test\)\]\s*\n(pub(\(crate\))? )?mod \w+', src)
    return src[:m.start()] if m else src
res=[]
for root in sys.argv[1:]:
  for dp,dn,fn in os.walk(root):
    if '/target' in dp or '/tests' in dp or '/benches' in dp or '/examples' in dp or '/fixtures' in dp: continue
    for f in fn:
      if not f.endswith('.rs'): continue
      p=os.path.join(dp,f); s=strip_tests(open(p).read()); lines=s.split('\n')
      i=0
      while i<len(lines):
        l=lines[i]
        if re.match(r'\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+\w+',l):
          # find opening brace
          depth=0; started=False; j=i
          while j<len(lines):
            for ch in lines[j]:
              if ch=='{': depth+=1; started=True
              elif ch=='}': depth-=1
            if started and depth==0: break
            if not started and lines[j].rstrip().endswith(';'): break
            j+=1
          n=j-i+1
          if n>100: res.append((n,p,i+1,l.strip()[:60]))
          i=j+1 if started else i+1
        else: i+=1
for r in sorted(res,reverse=True): print(*r)
print(f'{len(res)} function(s) over 100 lines in', ' '.join(sys.argv[1:]))
sys.exit(1 if res else 0)
