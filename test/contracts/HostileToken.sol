// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// A token contract whose views answer what no real token should: a symbol() of many kilobytes with
/// NUL bytes, line breaks and other control characters in it, a decimals() word far outside uint8,
/// and a localDomain() that reverts. What Ferry reads from it must be stored and shown safely.
contract HostileToken {
    uint256 public immutable symbolBytes;

    constructor(uint256 symbolBytes_) {
        symbolBytes = symbolBytes_;
    }

    function symbol() external view returns (string memory s) {
        bytes memory b = new bytes(symbolBytes);
        for (uint256 i = 0; i < b.length; i++) {
            // NUL, newline, DEL, ESC and printable letters, in turn.
            uint256 k = i % 5;
            b[i] = k == 0 ? bytes1(0x00) : k == 1 ? bytes1(0x0a) : k == 2 ? bytes1(0x7f) : k == 3 ? bytes1(0x1b) : bytes1(0x41);
        }
        s = string(b);
    }

    /// Declared uint8 by the ERC-20 interface; this word is not one.
    function decimals() external pure returns (uint256) {
        return type(uint256).max;
    }

    function localDomain() external pure returns (uint32) {
        revert("no domain here");
    }
}
